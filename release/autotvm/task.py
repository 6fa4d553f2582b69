"""``autotvm.task``: make tasks (``create``) and the Task class."""

from __future__ import annotations

from ..errors import AliasError, WorkloadError
from ..task import Task, create_task


def create(task_name, args=(), target="llvm", target_host=None, **kwargs) -> Task:
    """AutoTVM's ``create(task_name, args, target, target_host=None)``: a :class:`Task`.

    Parameters
    ----------
    task_name : str, callable, list of te.Tensor, PrimFunc or IRModule
        A registered workload name (``"resnet18.conv2d.2"``; ``release workloads`` lists them), a
        program, or a function that returns one when called with ``args`` (where AutoTVM took a
        template: the same compute, without knobs; the task is named after the function).
    args : tuple
        Arguments of a function ``task_name`` (none for a name or a program).
    target : str, dict or tvm.target.Target
        See :func:`release.target.resolve_target`.
    target_host : None
        TVM 0.27 keeps the host inside the target (``tvm.target.Target(target, host=...)``);
        anything but None raises :class:`AliasError`.
    **kwargs
        Passed on to :func:`release.task.create_task` (``layout``, ``prepack``, ``layout_free``).

    Raises
    ------
    AliasError
        ``target_host`` given.
    WorkloadError, TargetError
        As :func:`release.task.create_task`; ``args`` given with a name or a program.
    """
    if target_host is not None:
        raise AliasError("autotvm.task.create(target_host=...): TVM 0.27 keeps the host inside the target; give "
                         "target=tvm.target.Target(target, host=target_host)")
    if callable(task_name) and not hasattr(task_name, "script"):  # a function, not a PrimFunc / IRModule
        program = task_name(*args)
        if set(kwargs) - {"layout_free"}:
            return create_task(program, target, **kwargs)  # layout / prepack: its error for a program
        return Task(program, target, name=getattr(task_name, "__name__", None), layout_free=kwargs.get("layout_free"))
    if args:
        raise WorkloadError(f"autotvm.task.create({task_name!r}, args={args!r}): args are for a function that "
                            "returns the program; a workload name or a program takes none")
    return create_task(task_name, target, **kwargs)


__all__ = ["Task", "create"]
