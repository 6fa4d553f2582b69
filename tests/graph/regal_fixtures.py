"""Hand-made graphs shared by the REGAL tests (optima derived by hand in each docstring)."""

import numpy as np
from release.graph.graph import ComputationGraph


def two_branch(control=()):
    """a -> {b1 -> c1, b2 -> c2} -> d; b1, b2 hold 10 bytes, the rest 1.

    Peak memory (one device): 12 when one branch finishes before the other starts (during c1: a, b1, c1),
    21 when b1 and b2 are live together (the given order a, b1, b2, c1, c2, d).
    """
    #          a  b1  b2  c1 c2 d
    size = [1, 10, 10, 1, 1, 1]
    cost = [1, 1, 1, 1, 1, 1]
    edges = [(0, 1), (0, 2), (1, 3), (2, 4), (3, 5), (4, 5)]
    return ComputationGraph(cost, size, edges, list(control), names=["a", "b1", "b2", "c1", "c2", "d"],
                            name="two-branch")


def fork_join():
    """a(1) -> b(10), c(10) -> d(1); every output 100 bytes.

    With a link of latency 2 us and 100 bytes/us a transfer costs 3 us: on two devices the optimal makespan is
    15 (c on the other device starts at 1 + 3, ends at 14; d joins there when b's copy arrives at 14);
    on one device it is 22. With latency 20 us (transfer 21 us) one device (22) is optimal.
    """
    return ComputationGraph([1, 10, 10, 1], [100, 100, 100, 100], [(0, 1), (0, 2), (1, 3), (2, 3)],
                            names=["a", "b", "c", "d"], name="fork-join")
