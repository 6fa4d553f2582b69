"""Knob spaces derived from MetaSchedule design spaces (see :mod:`release.space.knob_space`)."""

from .knob_space import Config, Knob, KnobSpace, factorizations

__all__ = ["Config", "Knob", "KnobSpace", "factorizations"]
