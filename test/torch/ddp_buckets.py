"""What the DDP checks compare: the gradient buckets train_ddp.py's reducer reported, and the
AllReduces of the job's first communicator in fakegpu's report, each as a count per size."""

import collections


def reducer_buckets(rank_result):
    """Bucket sizes in bytes over every step of one rank's train_ddp.py result."""
    return collections.Counter(size for step in rank_result["buckets"] for size in step)


def reported_allreduces(report):
    """AllReduce calls per size in bytes on communicator 1 (the default process group)."""
    reduced = collections.Counter()
    for op in report["operations"]:
        if op["collective"] == "AllReduce" and op["communicator"] == 1:
            reduced[op["bytes"]] += op["calls"]
    return reduced
