"""``autotvm.task``: make tasks (``create``) and the Task class."""

from ..task import Task, create_task

create = create_task

__all__ = ["Task", "create"]
