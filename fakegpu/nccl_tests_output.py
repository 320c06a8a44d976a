"""Reads what nccl-tests prints: each run's collective, its ranks' hosts, its result rows, and the
algorithm and protocol NCCL reports choosing when the run had NCCL_DEBUG=INFO and
NCCL_DEBUG_SUBSYS=TUNING. A file may hold several runs (one per `# nThread` header), as a
script running all_reduce_perf then all_gather_perf writes them; lines may carry a launcher's
prefix ("0: " from srun, "[1,0]<stdout>:" from mpirun --tag-output)."""

import re
from dataclasses import dataclass, field

# nccl-tests' binaries, by the collective names fgpu model takes.
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast", "reduce", "sendrecv",
               "gather", "scatter", "hypercube")
# NCCL's names in its tuning lines (ncclFuncToString), by those names.
NCCL_FUNCS = {"AllReduce": "all_reduce", "AllGather": "all_gather", "ReduceScatter": "reduce_scatter",
              "Broadcast": "broadcast", "Reduce": "reduce"}
# NCCL's algorithm and protocol names (words from 2.26, numbers before), as fakegpu-model prints
# them. Words match in capitals without underscores: NCCL's NVLS_TREE is the model's NVLSTree.
ALGORITHM_IDS = ("Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT")
ALGORITHMS = {name.upper(): name for name in ALGORITHM_IDS}
PROTOCOL_IDS = ("LL", "LL128", "Simple")
PROTOCOLS = {name.upper(): name for name in PROTOCOL_IDS}
DATATYPES = {"int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float", "double", "bfloat16",
             "f8e4m3", "f8e5m2", "fp8_e4m3", "fp8_e5m2"}

RUN_START = re.compile(r"#\s*nThread\s+\d+")
TEST_NAME = re.compile(r"\b(" + "|".join(COLLECTIVES) + r")_perf\b")
RANK_LINE = re.compile(r"#\s*Rank\s+(\d+)\s+Group\s+\d+\s+Pid\s+\d+\s+on\s+(\S+)\s+device\s+\d+")
# "AllReduce: 1048576 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..0}" from NCCL 2.26, which
# counts a gather's or a reduce-scatter's bytes per rank; before, numbers and a time, the bytes
# of the whole buffer, and before 2.23 no collective's name.
# The NCCL a run used: nccl-tests' header ("# nccl-tests version 2.17.6 nccl-headers=22501
# nccl-library=22501") or NCCL's own INFO line ("NCCL INFO NCCL version 2.18.5+cuda12.2").
LIBRARY_CODE = re.compile(r"nccl-library=(\d{5})\b")
NCCL_VERSION_LINE = re.compile(r"NCCL INFO NCCL version (\d+\.\d+\.\d+)")
TUNING_LINE = re.compile(r"NCCL INFO (?:(\w+): )?(\d+) Bytes -> Algo (\w+) proto (\w+)( channel)?")
INT = re.compile(r"-?\d+$")


@dataclass
class Row:
    size: int  # bytes, nccl-tests' size column
    root: int  # -1 where the collective has none
    out_of_place_us: float
    in_place_us: float | None


@dataclass
class Run:
    collective: str | None  # None where the output names no test binary
    hosts: dict = field(default_factory=dict)  # rank -> host, from the "# Rank ... on HOST" lines
    rows: list = field(default_factory=list)
    # (collective or None, bytes as NCCL logs them, whether those are per rank) -> (algorithm, protocol)
    choices: dict = field(default_factory=dict)
    nccl_version: str | None = None  # "2.18.5", where the output names it

    def ranks_per_host(self) -> dict:
        counts = {}
        for host in self.hosts.values():
            counts[host] = counts.get(host, 0) + 1
        return counts

    def nccl_choice(self, size: int):
        """NCCL's (algorithm, protocol) for a row's size (nccl-tests' whole buffer), or None where
        the log has no tuning line for it."""
        n, per_rank = len(self.hosts), None
        if self.collective not in ("all_gather", "reduce_scatter"):
            per_rank = self.choices.get((self.collective, size, True))
        elif n and size % n == 0:  # without its ranks, a line's bytes per rank cannot be placed
            per_rank = self.choices.get((self.collective, size // n, True))
        return per_rank or self.choices.get((self.collective, size, False)) or self.choices.get((None, size, False))


def strip_prefix(line: str) -> str:
    """A launcher's label in front of nccl-tests' own text."""
    line = re.sub(r"^\s*\[\d+,\d+\]<\w+>:", "", line)
    return re.sub(r"^\s*\d+:\s", "", line)


def parse_row(tokens):
    """A result row's Row, or None: size, count, type, redop, [root,] time, algbw, busbw, #wrong
    (or error), then the same four in place. nccl-tests before 2.13 prints no root column."""
    for i in range(len(tokens) - 6):
        if not (INT.match(tokens[i]) and INT.match(tokens[i + 1]) and tokens[i + 2] in DATATYPES):
            continue
        j, root = i + 4, -1
        if INT.match(tokens[j]):
            root, j = int(tokens[j]), j + 1
        try:
            out_of_place = float(tokens[j])
        except (ValueError, IndexError):
            return None
        try:
            in_place = float(tokens[j + 4])
        except (ValueError, IndexError):
            in_place = None
        return Row(int(tokens[i]), root, out_of_place, in_place)
    return None


def algorithm_and_protocol(algo: str, proto: str):
    """fakegpu-model's names for NCCL's, given as numbers (before 2.26) or words."""
    def named(token, ids, names):
        if token.isdigit():
            return ids[int(token)] if int(token) < len(ids) else None
        return names.get(token.upper().replace("_", ""))
    a, p = named(algo, ALGORITHM_IDS, ALGORITHMS), named(proto, PROTOCOL_IDS, PROTOCOLS)
    return (a, p) if a and p else None


def library_version(line: str):
    """The NCCL version a line names ("2.25.1"), or None."""
    code = LIBRARY_CODE.search(line)
    if code:
        n = int(code.group(1))
        return f"{n // 10000}.{n // 100 % 100}.{n % 100}"
    named = NCCL_VERSION_LINE.search(line)
    return named.group(1) if named else None


def parse(text: str):
    """Every run in the text, in order. Lines before a run's `# nThread` header (the launcher's
    command line, "Collective test starting: X_perf") name its collective."""
    runs, pending_name, current, version = [], None, None, None
    for raw in text.splitlines():
        line = strip_prefix(raw)
        named_version = library_version(line)
        if named_version:  # names the NCCL of the runs from here on, and of the run under way
            version = named_version
            if current is not None and current.nccl_version is None:
                current.nccl_version = version
            continue
        if RUN_START.search(line):
            current = Run(pending_name, nccl_version=version)
            runs.append(current)
            pending_name = None
            continue
        rank, tuning = RANK_LINE.search(line), TUNING_LINE.search(line)
        name = TEST_NAME.search(line) if not (rank or tuning) else None
        if name:
            pending_name = name.group(1)
            if current is not None and current.collective is None and not current.rows:
                current.collective = pending_name
            continue
        if current is None:  # a bare table, pasted without its header
            current = Run(None)
            runs.append(current)
        if rank:
            current.hosts[int(rank.group(1))] = rank.group(2)
        elif tuning:
            choice = algorithm_and_protocol(tuning.group(3), tuning.group(4))
            func = NCCL_FUNCS.get(tuning.group(1)) if tuning.group(1) else None
            if choice and (func or not tuning.group(1)):
                current.choices[(func, int(tuning.group(2)), bool(tuning.group(5)))] = choice
        elif not line.lstrip().startswith("#"):
            row = parse_row(line.split())
            if row and row.size > 0:
                current.rows.append(row)
    return [r for r in runs if r.rows]
