#!/usr/bin/env python3
"""Cost-model fidelity: model every public NCCL measurement of the calibration set and print
predicted, measured and error, and the errors' median by message size and by scope (one node
or across nodes).

The rows restate shared/reference/calibration-measurements.md (public nccl-tests runs). The
model is not fitted to them row by row: it uses NCCL's own constants and the link physics in
docs/cost-model.md. With --check it exits non-zero when the calibration rows' median absolute
error exceeds 5% or the other public rows' exceeds 10%, the project's fidelity targets for
medians. The worst row is printed against its target (25%) but not enforced: some public
regimes are still further off, and docs/cost-model.md says which.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CAL = ROOT / "verification" / "calibration"
GIB = 1 << 30
MIB = 1 << 20

H100 = "h100-sxm-1x8.yaml"
A100 = "a100-80gb-1x8.yaml"
P4D = "a100-40gb-p4d-4x8.yaml"
HDR = "a100-hdr-3x8.yaml"
NDR = "h100-ndr-2x1.yaml"
NVLS = ["--algo", "nvls"]

# (id, config, shape flags, collective, size in bytes, metric, measured, note)
# metric: busbw in GB/s as nccl-tests prints it, or time in microseconds.
ROWS = [
    # The source's script runs all_reduce_perf once per algorithm with NCCL_ALGO set
    # (Benchmarks/NCCLBandwidth.py): these figures, up to 479 GB/s, are its NVLS run.
    ("C1", H100, NVLS, "all_reduce", 1024, "time", 25.6, "8 x H100, NVLS forced"),
    ("C1", H100, NVLS, "all_reduce", MIB, "busbw", 43.70, ""),
    ("C1", H100, NVLS, "all_reduce", 16 * MIB, "busbw", 234.45, ""),
    ("C1", H100, NVLS, "all_reduce", 128 * MIB, "busbw", 400.61, ""),
    ("C1", H100, NVLS, "all_reduce", GIB, "busbw", 466.35, ""),
    ("C1", H100, NVLS, "all_reduce", 8 * GIB, "busbw", 478.87, ""),
    ("C2", A100, [], "all_reduce", MIB, "busbw", 36.22, "8 x A100, NCCL 2.18.5"),
    ("C2", A100, [], "all_reduce", GIB, "busbw", 228.10, ""),
    ("C2", A100, [], "all_reduce", 8 * GIB, "busbw", 231.58, ""),
]
for gpus in range(2, 9):
    ROWS.append(("C3", H100, ["--gpus-per-node", str(gpus), "--algo", "ring"], "all_reduce", 4 * GIB, "busbw",
                 367.5, f"{gpus} x H100, Ring forced"))
for gpus, busbw in ((2, 370), (3, 370), (4, 370), (5, 420), (6, 440), (7, 460), (8, 480)):
    ROWS.append(("C3", H100, ["--gpus-per-node", str(gpus)], "all_reduce", 4 * GIB, "busbw", busbw,
                 f"{gpus} x H100, NCCL picks"))
ROWS += [
    ("C4", H100, [], "all_gather", 8 * GIB, "busbw", 370, "8 x H100"),
    ("C4", H100, [], "reduce_scatter", 8 * GIB, "busbw", 370, ""),
    ("C5", P4D, ["--nodes", "1"], "all_reduce", GIB, "time", 8142.6, "p4dn, 8 ranks"),
    ("C5", P4D, ["--nodes", "2"], "all_reduce", GIB, "time", 35215, "16 ranks"),
    ("C5", P4D, ["--nodes", "3"], "all_reduce", GIB, "time", 64782, "24 ranks"),
    ("C5", P4D, ["--nodes", "4"], "all_reduce", GIB, "time", 70253, "32 ranks"),
    ("C6", HDR, ["--nodes", "2"], "all_reduce", 4 * GIB, "busbw", 91, "2 x 8 A100, 4 x HDR"),
    ("C7", HDR, ["--nodes", "3"], "all_reduce", 128 * MIB, "busbw", 96, "3 x 8 A100, 4 x HDR"),
    ("C8", NDR, [], "sendrecv", GIB, "busbw", 47, "one NDR NIC"),
]

# Public runs across the regimes the calibration rows leave out: small and mid sizes, several
# nodes, other networks (EFA, TCPXO, RoCE with two NICs per GPU), GB200 racks. Each row's source:
#   R1-6  8 x H20, NCCL 2.30.4, one process per GPU: kvcache-ai/Mooncake pull request 3484, NCCL baseline
#   R2-2  2 x HGX H100, 8 x 400G NDR, NCCL 2.26.2: NVIDIA/nccl-tests issue 309, opening post
#   R2-4  8 x HGX H100, 8 x 400G IB, NCCL 2.2x, defaults: NVIDIA/nccl-tests issue 309, comments of 2025-06-18
#   R34-3 2 x HGX H100, Ring forced, NCCL_MIN_CTAS=24 and NCCL_IB_QPS_PER_CONNECTION=2 (the run's command
#         line): NVIDIA/nccl-tests issue 309, comments of 2025-06-18
#   R34-4 R2-4's 8 nodes with NCCL_MIN_CTAS=24 and NCCL_IB_QPS_PER_CONNECTION=2: the same comment
#   R2-6  2 x AWS p5.48xlarge, 32 x 100G EFA: aws-samples/awsome-distributed-training,
#         micro-benchmarks/nccl-tests/README.md, "2x p5.48xlarge"
#   R2-7  2 x AWS p4de.24xlarge, 4 x 100G EFA: the same README, "2x p4de.24xlarge"
#   R2-1  2 x GCP A3 Mega, 8 x 200G TCPXO: lessizzmore/create-a3mega-ztan-fork, ztan-NCCL-test-result.
#         The run hands its ranks their NCCL variables with `-x ${HOST_VARS}`, the idiom of Google's
#         A3 Mega Slurm recipes, which source Google's TCPXO profile first: the preset's nccl_conf.
#   R3-1  2 x OCI BM.GPU4.8, 16 x 100G RoCE: oracle-quickstart/oci-hpc-oke,
#         docs/running-rdma-workloads-on-oke-h100.md
#   R6-1  GB200 NVL72, one rack: coreweave/nccl-tests README.md, "GB200 > Single Rack"
#   R6-2  GB200 NVL72, two racks: the same README, "GB200 > 2 Racks"
#   R6-3  GB200 NVL72, 20 racks (1440 GPUs), NVLS off: the same README, "GB200 > 20 Racks". The three
#         tables landed together (2025-05-05) with job files that set NCCL_NVLS_ENABLE=0 and
#         NCCL_COLLNET_ENABLE=0, as the repository's GB200 job had since 2025-04-14 ("disable NVLS
#         temporarily"; on before that, with an NCCL 2.25.1 image). The one- and two-rack tables
#         name another host and an older driver's "NVIDIA Graphics Device", and reach 834 GB/s on
#         one rack, which only NVLS reaches there (rings over GB200's NVLink reach 680, R11-2): an
#         earlier run, NVLS on. The 20-rack table names "NVIDIA GB200" and has a ring's shape.
#   R1-4  8 x RTX 5090 on PCIe, peer access enabled, NCCL 2.29.7: aikitoria/open-gpu-kernel-modules,
#         README.md, "Sample nccl-tests all_reduce_perf output"
#   R7-1  8 x H100, one node, one process per GPU (a p5 by the README's Batch stack; the log names no
#         GPU): aws-samples/awsome-distributed-training, micro-benchmarks/nccl-tests/aws-batch/README.md,
#         "Check the output"
#   R7-2  4 x H100 SXM of an NVSwitch board, NCCL 2.26.2, one process for 4 GPUs (large sizes only:
#         its small ones carry that process's launch cost): dudeperf3ct/dudeperf3ct.github.io,
#         content/posts/distributed_communication_part1.md
#   R7-3  8 x A100 SXM 80GB, NCCL 2.16.2, a run's log kept as a test's sample: theap06/gcm,
#         gcm/tests/health_checks_tests/test_check_nccl.py, sample_single_success_output
#   R7-4  2 x A3 Ultra (8 x H200, 8 x 400G RoCE, gIB plugin), NCCL 2.26.6, all_gather:
#         skypilot-org/skypilot, examples/gcp_gpu_direct_tcpx/README.md, raw NCCL test pods
#   R7-5  2 x 8 H100 on InfiniBand (Nebius, 8 HCAs): skypilot-org/skypilot,
#         examples/nebius_infiniband/README.md
#   R7-6  GB200 NVL72 on OCI (4 GPUs a tray, 4 x 400G RoCE), NCCL 2.27.3: 2 trays of one rack, and 16
#         trays (64 GPUs) of each of 2 and 3 racks (32 and 48 nodes) at 4 and 8 GiB: oracle-quickstart/oci-gpu-quickstarts,
#         nvidia/GB200/README-GB200.md
#   R8-1  4 x RTX 5090 without peer access (SHM through host memory), AMD Genoa host: NVIDIA/nccl-tests
#         issue 287, comment of 2025-03-14
#   R8-2  8 x RTX 4090 without peer access, default algorithm, -n 200: NVIDIA/nccl issue 1530, the
#         author's comment that the pattern remains
#   R9-1  8 x B200 (Xeon host), NCCL 2.29.2, one process for 8 GPUs (sizes from 64 MiB: the smaller
#         ones carry that process's launch cost, 33 to 57 us at 1 MiB whatever the collective):
#         mit-orcd/orcd-benchmarks, b200-ubuntu/out-nccl-1node/nccl-1node-node5700-20260810-143247.out.
#         all_reduce at its five sizes from 64 MiB; the file's other collectives at 64 MiB, 1 GiB
#         and 16 GiB, but hypercube (it fails its own check)
#   R9-2  2 x GCP A4 (8 x B200, 8 x 400G RoCE, gIB plugin), one process per GPU: yangwhale/gpu-tpu-pedia,
#         gpu/deepep README, cross-node NCCL test section
#   R10-1 8 x A100-SXM4-80GB (host "thanos"), NCCL from pip's nvidia-nccl-cu12, mpirun -np 8, one process
#         per GPU: a public write-up (in Chinese) on building OpenMPI 5.0.5 and nccl-tests, whose only
#         reference is medium.com/@ed.sealing/multi-node-gh200-nccl-testing-dc2fc64d97a0
#   R11-1 8 x H200 (Azure ND H200 v5), NCCL 2.20.5, NVLS forced, one process for 8 GPUs (sizes from 64
#         MiB): Azure/AI-benchmarking-guide, Azure_Results/ND_H200_v5_results.md
#   R11-2 4 x GB200 of one tray (Azure ND GB200 v6), NCCL 2.25.1, Ring forced, one process for 4 GPUs
#         (sizes from 64 MiB): Azure/AI-benchmarking-guide, Azure_Results/ND_GB200_v6_results.md
#   R12-1 GB200 NVL72, 4 and 8 GPUs of each of 3 racks (InfiniBand between them), NCCL 2.27.3, NVLS off
#         (Ring and Tree left: NCCL picks Ring), and Tree forced: NVIDIA/nccl issue 1801, opening post
#   R13-1 2 x 8 A100 80GB SXM (Crusoe, virtual machines), 8 InfiniBand HCAs per node, one process per
#         GPU, -n 100: dstackai/dstack, examples/clusters/crusoe/README.md, "NCCL tests" (the version of
#         2026-02-27; later versions dropped the output). The page names the HCAs, not their speed: they
#         are modeled as a DGX A100's 200 Gbit/s HDR, which its 194 GB/s at 2 GiB (a ring across two
#         nodes, eight NICs a side) agrees with
#   R13-2 2 x 8 B200 (Lambda 1-Click Cluster), NCCL 2.26.2, one process per GPU, -n 100: dstackai/dstack,
#         mkdocs/docs/examples/clusters/lambda.md, "Run NCCL tests". The page names no network: modeled
#         as a DGX B200's 8 x 400 Gbit/s InfiniBand, what Lambda builds those clusters with
#   R13-3 2 x GCP A4 (8 x B200, 8 x 400G RoCE): dstackai/dstack, mkdocs/docs/examples/clusters/gcp.md,
#         "NCCL tests", tab A4 (the page keeps the rows from 8 MiB up)
#   R14-1 8 x H200, all_reduce at 8 GiB on 4 to 8 of its GPUs, nccl-tests, with the algorithm NCCL picked
#         (Ring on 4, NVLS from 5): stas00/ml-engineering, network/README.md, "SHARP" (the GPU-count table)
#   R14-2 8 x B200 (AWS p6-b200.48xlarge), NCCL 2.27.7 and AWS's tuner plugin, the same sweep (Ring on 4
#         and 5, NVLS from 6): the same section. Each row runs the algorithm the run reports, as C3's do.
#   R15-1 2 x GCP A4 (8 x B200, 8 x 400G RoCE, gIB plugin and its settings script), all_gather, one
#         process per GPU, --iters 100: GoogleCloudPlatform/cluster-toolkit, examples/gke-a4/README.md,
#         "Deploy and run NCCL test with Topology Aware Scheduling" (the version before 2025-04-10, when
#         the table was removed)
#   R16-1 10 x 8 H100 SXM, one 400 Gbit/s NIC a GPU (48.8 GB/s on a ring of one GPU a node: modeled as
#         DGX H100s), NCCL 2.29.2, one process per GPU, from 32 MiB: xxrjun/nccl-tests-cluster,
#         benchmarks/example-cluster01/nccl-benchmark-results/multi-node/runs/20260129-180219, the runs
#         with 1, 2, 4 and 8 GPUs of each of the 10 nodes, every collective each run times
#   R16-2 one node of that cluster, its 8 GPUs: the same repository's single-node run of cnode3-002
#         (runs/20260128-145017), every collective it times
#   R16-3 two nodes of that cluster, 1, 2, 4 and 8 GPUs of each: the repository's pairwise runs
#         (runs/20260128-010702, AlltoAll and the ring of sends from 4 GiB), the median over its 45
#         pairs of nodes at 16 GiB
#   R17-1 8 x A100 SXM (NVSwitch), nccl-tests' sendrecv, one process for 8 GPUs, from 128 MiB:
#         li-plus/playground, cuda/nccl.md
# R13's, R15's and R16's sizes are R7-1's (8 B, 1 and 32 KiB, 256 KiB, 1 and 4 MiB, 16 and 128 MiB,
# 1 GiB) where the sweep has them and its largest, less a size whose out-of-place time is over
# 1.5 times its in-place one, a hiccup of the run (R13-1 at 256 KiB: 192.8 us, in place 100.0).
DGX_H100, H200 = "configs/presets/dgx-h100-1node.yaml", "configs/presets/hgx-h200-1node.yaml"
H20 = "configs/presets/h20-1node.yaml"
A3ULTRA, DGX_A100 = "gcp-a3-ultra-1x8.yaml", "configs/presets/dgx-a100-1node.yaml"
NVL72 = "configs/presets/gb200-nvl72-1node.yaml"
P5, P4DE, A3MEGA = "configs/presets/aws-p5-1node.yaml", "configs/presets/aws-p4de-1node.yaml", "configs/presets/gcp-a3-mega-1node.yaml"
OCI16, RTX5090 = "oci-a100-16nic-1x8.yaml", "rtx5090-pcie-1x8.yaml"
RTX5090_SHM, RTX4090_SHM = "rtx5090-shm-1x4.yaml", "rtx4090-shm-1x8.yaml"
DGX_B200, GCP_A4 = "configs/presets/dgx-b200-1node.yaml", "gcp-a4-1x8.yaml"
KIB = 1024
CTAS_24 = "NCCL_MIN_CTAS=24"  # R34's runs: 24 channels where NCCL's search gives 16


def timed_runs(rid, config, flags, runs, sizes, note):
    """Rows of a run that times several collectives at the same sizes: `runs` pairs each collective
    with its times (us) at `sizes`; the first row of each collective carries `note` with its name."""
    return [(rid, config, flags, coll, size, "time", us, note.format(coll) if i == 0 else "")
            for coll, times in runs for i, (size, us) in enumerate(zip(sizes, times))]


# R16-1's times (us) at 128 MiB, 1 GiB and 16 GiB, by GPUs of each node and collective.
R16_1_TIMES = {
    1: (("all_reduce", (5031.02, 39744.4, 632480)), ("all_gather", (2607.15, 20609.1, 321112)),
        ("reduce_scatter", (2585.19, 20189.8, 316586)), ("alltoall", (2795.45, 21624.7, 346210)),
        ("sendrecv", (5436.43, 43154.7, 691104))),
    2: (("all_reduce", (2832.27, 20875.4, 333590)), ("all_gather", (1378.80, 10500.9, 167723)),
        ("reduce_scatter", (1384.45, 10549.7, 166835)), ("alltoall", (2798.17, 21499.9, 341262)),
        ("sendrecv", (5326.14, 42626.1, 681954))),
    4: (("all_reduce", (1752.10, 10728.4, 170665)), ("all_gather", (794.22, 5421.99, 86184.2)),
        ("reduce_scatter", (795.96, 5416.79, 85733.1)), ("alltoall", (2964.53, 21521.0, 338186)),
        ("sendrecv", (5114.20, 40898.8, 655122))),
    8: (("all_reduce", (1250.59, 6149.19, 105854)), ("all_gather", (840.85, 4001.42, 52314.1)),
        ("reduce_scatter", (1058.78, 3786.91, 52458.7)), ("alltoall", (2944.85, 21159.9, 336737)),
        ("sendrecv", (8821.21, 70501.7, 1128428))),
}
# R16-2's times (us) at 128 MiB, 1 GiB and 16 GiB, and R16-3's medians at 16 GiB by GPUs of each node.
R16_2_TIMES = (("all_reduce", (564.78, 4000.82, 62340.7)), ("all_gather", (382.20, 2719.60, 41542.0)),
               ("reduce_scatter", (380.31, 2741.51, 41211.4)), ("alltoall", (393.32, 2830.00, 43193.3)),
               ("sendrecv", (825.74, 2974.51, 46779.2)))
R16_3_TIMES = {1: (("alltoall", 238157), ("sendrecv", 432803)), 2: (("alltoall", 182993), ("sendrecv", 431642)),
               4: (("alltoall", 179828), ("sendrecv", 412531)), 8: (("alltoall", 175431), ("sendrecv", 398612))}
# R9-1's other collectives: its times (us) at 64 MiB, 1 GiB and 16 GiB.
R9_1_OTHER_COLLECTIVES = (("all_gather", (141.5, 1520.2, 22446)), ("reduce_scatter", (141.4, 1468.3, 21595)),
                          ("reduce", (133.5, 1631.6, 25231)), ("broadcast", (135.1, 1643.8, 25268)),
                          ("alltoall", (140.4, 1553.9, 22749)), ("gather", (95.88, 1346.1, 20935)),
                          ("scatter", (98.87, 1317.9, 20150)), ("sendrecv", (796.9, 1687.5, 26206)))

WIDER = [
    ("R1-6", H20, [], "all_reduce", 32 * KIB, "time", 18.66, "8 x H20, small"),
    ("R1-6", H20, [], "all_reduce", 512 * KIB, "time", 20.39, ""),
    ("R1-6", H20, [], "all_reduce", 4 * MIB, "time", 53.24, ""),
    ("R1-6", H20, [], "all_reduce", 16 * MIB, "time", 121.33, ""),
    ("R1-6", H20, [], "all_reduce", 128 * MIB, "time", 700.25, ""),
    ("R1-6", H20, [], "all_reduce", GIB, "time", 5252.6, ""),
    ("R2-2", DGX_H100, ["--nodes", "2"], "all_reduce", 16, "time", 25.0, "2 x 8 H100 NDR"),
    ("R2-2", DGX_H100, ["--nodes", "2"], "all_reduce", 64 * KIB, "time", 33.8, ""),
    ("R2-2", DGX_H100, ["--nodes", "2"], "all_reduce", MIB, "time", 71.9, ""),
    ("R2-2", DGX_H100, ["--nodes", "2"], "all_reduce", 16 * MIB, "time", 185.4, ""),
    ("R2-2", DGX_H100, ["--nodes", "2"], "all_reduce", 256 * MIB, "time", 1282.8, ""),
    ("R2-2", DGX_H100, ["--nodes", "2"], "all_reduce", 16 * GIB, "time", 68652, ""),
    ("R34-3", DGX_H100, ["--nodes", "2", "--algo", "ring", CTAS_24], "all_reduce", 64 * MIB, "time", 433.8,
     "Ring forced, 24 CTAs"),
    ("R34-3", DGX_H100, ["--nodes", "2", "--algo", "ring", CTAS_24], "all_reduce", 8 * GIB, "time", 41015, ""),
    ("R34-4", DGX_H100, ["--nodes", "8", CTAS_24], "all_reduce", MIB, "time", 127.0, "8 x 8 H100, 24 CTAs"),
    ("R34-4", DGX_H100, ["--nodes", "8", CTAS_24], "all_reduce", 16 * MIB, "time", 510.5, ""),
    ("R34-4", DGX_H100, ["--nodes", "8", CTAS_24], "all_reduce", 256 * MIB, "time", 2199.4, ""),
    ("R34-4", DGX_H100, ["--nodes", "8", CTAS_24], "all_reduce", 8 * GIB, "time", 43211, ""),
    ("R2-4", DGX_H100, ["--nodes", "8"], "all_reduce", MIB, "time", 117.0, "8 x 8 H100 IB"),
    ("R2-4", DGX_H100, ["--nodes", "8"], "all_reduce", 16 * MIB, "time", 378.1, ""),
    ("R2-4", DGX_H100, ["--nodes", "8"], "all_reduce", 256 * MIB, "time", 1955, ""),
    ("R2-4", DGX_H100, ["--nodes", "8"], "all_reduce", 8 * GIB, "time", 52733, ""),
    ("R2-6", P5, ["--nodes", "2"], "all_reduce", KIB, "time", 69.2, "2 x p5, EFA"),
    ("R2-6", P5, ["--nodes", "2"], "all_reduce", MIB, "time", 123.2, ""),
    ("R2-6", P5, ["--nodes", "2"], "all_reduce", 16 * MIB, "time", 298.1, ""),
    ("R2-6", P5, ["--nodes", "2"], "all_reduce", 128 * MIB, "time", 870.3, ""),
    ("R2-6", P5, ["--nodes", "2"], "all_reduce", 16 * GIB, "time", 66132, ""),
    ("R2-7", P4DE, ["--nodes", "2"], "all_reduce", 8, "time", 164.3, "2 x p4de, EFA v1"),
    ("R2-7", P4DE, ["--nodes", "2"], "all_reduce", MIB, "time", 309.4, ""),
    ("R2-7", P4DE, ["--nodes", "2"], "all_reduce", 16 * MIB, "time", 1191.8, ""),
    ("R2-7", P4DE, ["--nodes", "2"], "all_reduce", GIB, "time", 26217, ""),
    ("R2-1", A3MEGA, ["--nodes", "2"], "all_reduce", 256, "time", 123.0, "2 x A3 Mega, TCPXO"),
    ("R2-1", A3MEGA, ["--nodes", "2"], "all_reduce", MIB, "time", 203.2, ""),
    ("R2-1", A3MEGA, ["--nodes", "2"], "all_reduce", 128 * MIB, "time", 1652, ""),
    ("R2-1", A3MEGA, ["--nodes", "2"], "all_reduce", 8 * GIB, "time", 47535, ""),
    ("R3-1", OCI16, ["--nodes", "2"], "all_reduce", GIB, "time", 11774, "2 x OCI A100, 16 x 100G"),
    ("R6-1", NVL72, [], "all_reduce", GIB, "time", 3108.8, "GB200 NVL72, 1 rack"),
    ("R6-1", NVL72, [], "all_reduce", 8 * GIB, "time", 20299, ""),
    ("R6-2", NVL72, ["--nodes", "2"], "all_reduce", GIB, "time", 3574.4, "2 racks"),
    ("R6-2", NVL72, ["--nodes", "2"], "all_reduce", 16 * GIB, "time", 42067, ""),
    ("R6-3", NVL72, ["--nodes", "20", "--algo", "ring,tree"], "all_reduce", 512 * MIB, "time", 7108.4,
     "20 racks, NVLS off"),
    ("R6-3", NVL72, ["--nodes", "20", "--algo", "ring,tree"], "all_reduce", 4 * GIB, "time", 24782, ""),
    ("R6-3", NVL72, ["--nodes", "20", "--algo", "ring,tree"], "all_reduce", 16 * GIB, "time", 84625, ""),
    ("R1-4", RTX5090, [], "all_reduce", 8, "time", 24.5, "8 x RTX 5090, PCIe only"),
    ("R1-4", RTX5090, [], "all_reduce", 32 * KIB, "time", 39.3, ""),
    ("R1-4", RTX5090, [], "all_reduce", 256 * KIB, "time", 45.9, ""),
    ("R1-4", RTX5090, [], "all_reduce", 2 * MIB, "time", 104.5, ""),
    ("R1-4", RTX5090, [], "all_reduce", 16 * MIB, "time", 646.5, ""),
    ("R1-4", RTX5090, [], "all_reduce", 128 * MIB, "time", 5355, ""),
    ("R7-1", DGX_H100, [], "all_reduce", 8, "time", 12.90, "8 x H100, one node"),
    ("R7-1", DGX_H100, [], "all_reduce", KIB, "time", 16.43, ""),
    ("R7-1", DGX_H100, [], "all_reduce", 32 * KIB, "time", 18.78, ""),
    ("R7-1", DGX_H100, [], "all_reduce", 256 * KIB, "time", 20.27, ""),
    ("R7-1", DGX_H100, [], "all_reduce", MIB, "time", 28.56, ""),
    ("R7-1", DGX_H100, [], "all_reduce", 4 * MIB, "time", 55.44, ""),
    ("R7-1", DGX_H100, [], "all_reduce", 16 * MIB, "time", 124.0, ""),
    ("R7-1", DGX_H100, [], "all_reduce", 128 * MIB, "time", 592.8, ""),
    ("R7-1", DGX_H100, [], "all_reduce", GIB, "time", 4253.0, ""),
    ("R7-1", DGX_H100, [], "all_reduce", 16 * GIB, "time", 62239, ""),
    ("R7-2", DGX_H100, ["--gpus-per-node", "4"], "all_reduce", 16 * MIB, "time", 104.4, "4 x H100"),
    ("R7-2", DGX_H100, ["--gpus-per-node", "4"], "all_reduce", 128 * MIB, "time", 614.7, ""),
    ("R7-2", DGX_H100, ["--gpus-per-node", "4"], "all_reduce", GIB, "time", 4525.6, ""),
    ("R7-3", DGX_A100, [], "all_reduce", 32 * MIB, "time", 344.8, "8 x A100"),
    ("R7-3", DGX_A100, [], "all_reduce", 128 * MIB, "time", 1149.9, ""),
    ("R7-3", DGX_A100, [], "all_reduce", GIB, "time", 8109.1, ""),
    ("R7-4", A3ULTRA, ["--nodes", "2"], "all_gather", KIB, "time", 28.70, "2 x 8 H200, RoCE"),
    ("R7-4", A3ULTRA, ["--nodes", "2"], "all_gather", 64 * KIB, "time", 34.77, ""),
    ("R7-4", A3ULTRA, ["--nodes", "2"], "all_gather", MIB, "time", 54.70, ""),
    ("R7-4", A3ULTRA, ["--nodes", "2"], "all_gather", 16 * MIB, "time", 117.6, ""),
    ("R7-4", A3ULTRA, ["--nodes", "2"], "all_gather", 128 * MIB, "time", 493.7, ""),
    ("R7-4", A3ULTRA, ["--nodes", "2"], "all_gather", GIB, "time", 3126.8, ""),
    ("R7-4", A3ULTRA, ["--nodes", "2"], "all_gather", 8 * GIB, "time", 24739, ""),
    ("R7-5", DGX_H100, ["--nodes", "2"], "all_reduce", 512 * MIB, "time", 2432.7, "2 x 8 H100 IB"),
    ("R7-5", DGX_H100, ["--nodes", "2"], "all_reduce", 8 * GIB, "time", 34468, ""),
    ("R7-6", NVL72, ["--gpus-per-node", "8"], "all_reduce", 4 * GIB, "time", 9878.8, "GB200, 8 GPUs of a rack"),
    ("R7-6", NVL72, ["--nodes", "2", "--gpus-per-node", "64"], "all_reduce", 4 * GIB, "time", 11311, "2 racks x 64"),
    ("R7-6", NVL72, ["--nodes", "3", "--gpus-per-node", "64"], "all_reduce", 4 * GIB, "time", 12154, "3 racks x 64"),
    ("R7-6", NVL72, ["--nodes", "2", "--gpus-per-node", "64"], "all_reduce", 8 * GIB, "time", 21313, "2 racks x 64"),
    ("R7-6", NVL72, ["--nodes", "3", "--gpus-per-node", "64"], "all_reduce", 8 * GIB, "time", 22820, "3 racks x 64"),
    ("R8-1", RTX5090_SHM, [], "all_reduce", 8, "time", 15.60, "4 x RTX 5090, host memory"),
    ("R8-1", RTX5090_SHM, [], "all_reduce", KIB, "time", 15.88, ""),
    ("R8-1", RTX5090_SHM, [], "all_reduce", 32 * KIB, "time", 31.64, ""),
    ("R8-1", RTX5090_SHM, [], "all_reduce", 256 * KIB, "time", 45.84, ""),
    ("R8-1", RTX5090_SHM, [], "all_reduce", 2 * MIB, "time", 152.9, ""),
    ("R8-1", RTX5090_SHM, [], "all_reduce", 16 * MIB, "time", 935.7, ""),
    ("R8-1", RTX5090_SHM, [], "all_reduce", 128 * MIB, "time", 7384.4, ""),
    ("R8-2", RTX4090_SHM, [], "all_reduce", 8, "time", 43.47, "8 x RTX 4090, host memory"),
    ("R9-1", DGX_B200, [], "all_reduce", 64 * MIB, "time", 278.6, "8 x B200"),
    ("R9-1", DGX_B200, [], "all_reduce", 256 * MIB, "time", 710.5, ""),
    ("R9-1", DGX_B200, [], "all_reduce", GIB, "time", 2578.8, ""),
    ("R9-1", DGX_B200, [], "all_reduce", 4 * GIB, "time", 9011.3, ""),
    ("R9-1", DGX_B200, [], "all_reduce", 16 * GIB, "time", 35735, ""),
    *timed_runs("R9-1", DGX_B200, [], R9_1_OTHER_COLLECTIVES, (64 * MIB, GIB, 16 * GIB), "8 x B200, {}"),
    ("R9-2", GCP_A4, ["--nodes", "2"], "all_reduce", 16 * MIB, "time", 193.2, "2 x 8 B200, RoCE"),
    ("R9-2", GCP_A4, ["--nodes", "2"], "all_reduce", 64 * MIB, "time", 483.3, ""),
    ("R9-2", GCP_A4, ["--nodes", "2"], "all_reduce", 256 * MIB, "time", 1114.8, ""),
    ("R9-2", GCP_A4, ["--nodes", "2"], "all_reduce", GIB, "time", 3328.7, ""),
    ("R9-2", GCP_A4, ["--nodes", "2"], "all_reduce", 16 * GIB, "time", 47062, ""),
    ("R10-1", DGX_A100, [], "all_reduce", 8, "time", 20.26, "8 x A100, one process per GPU"),
    ("R10-1", DGX_A100, [], "all_reduce", KIB, "time", 24.43, ""),
    ("R10-1", DGX_A100, [], "all_reduce", 32 * KIB, "time", 30.25, ""),
    ("R10-1", DGX_A100, [], "all_reduce", 256 * KIB, "time", 27.65, ""),
    ("R10-1", DGX_A100, [], "all_reduce", MIB, "time", 37.89, ""),
    ("R10-1", DGX_A100, [], "all_reduce", 2 * MIB, "time", 55.39, ""),
    ("R10-1", DGX_A100, [], "all_reduce", 16 * MIB, "time", 213.3, ""),
    ("R10-1", DGX_A100, [], "all_reduce", 64 * MIB, "time", 615.7, ""),
    ("R10-1", DGX_A100, [], "all_reduce", GIB, "time", 8244.5, ""),
    ("R11-1", H200, NVLS, "all_reduce", 64 * MIB, "busbw", 368.11, "8 x H200, NVLS forced"),
    ("R11-1", H200, NVLS, "all_reduce", 256 * MIB, "busbw", 432.24, ""),
    ("R11-1", H200, NVLS, "all_reduce", GIB, "busbw", 467.58, ""),
    ("R11-1", H200, NVLS, "all_reduce", 8 * GIB, "busbw", 479.98, ""),
    ("R11-2", NVL72, ["--gpus-per-node", "4", "--algo", "ring"], "all_reduce", 64 * MIB, "busbw", 550.73,
     "4 x GB200 of a tray, Ring forced"),
    ("R11-2", NVL72, ["--gpus-per-node", "4", "--algo", "ring"], "all_reduce", 256 * MIB, "busbw", 593.53, ""),
    ("R11-2", NVL72, ["--gpus-per-node", "4", "--algo", "ring"], "all_reduce", GIB, "busbw", 646.87, ""),
    ("R11-2", NVL72, ["--gpus-per-node", "4", "--algo", "ring"], "all_reduce", 8 * GIB, "busbw", 679.61, ""),
    ("R12-1", NVL72, ["--nodes", "3", "--gpus-per-node", "4", "--algo", "ring,tree"], "all_reduce", 16 * GIB, "busbw",
     196.72, "GB200, 3 racks x 4, NVLS off"),
    ("R12-1", NVL72, ["--nodes", "3", "--gpus-per-node", "4", "--algo", "tree"], "all_reduce", 16 * GIB, "busbw",
     234.43, "Tree forced"),
    ("R12-1", NVL72, ["--nodes", "3", "--gpus-per-node", "8", "--algo", "ring,tree"], "all_reduce", 16 * GIB, "busbw",
     393.66, "3 racks x 8, NVLS off"),
    ("R12-1", NVL72, ["--nodes", "3", "--gpus-per-node", "8", "--algo", "tree"], "all_reduce", 16 * GIB, "busbw",
     485.68, "Tree forced"),
    ("R13-1", DGX_A100, ["--nodes", "2"], "all_reduce", 8, "time", 27.7, "2 x 8 A100, Crusoe, IB"),
    ("R13-1", DGX_A100, ["--nodes", "2"], "all_reduce", KIB, "time", 30.79, ""),
    ("R13-1", DGX_A100, ["--nodes", "2"], "all_reduce", 32 * KIB, "time", 45.2, ""),
    ("R13-1", DGX_A100, ["--nodes", "2"], "all_reduce", MIB, "time", 81.71, ""),
    ("R13-1", DGX_A100, ["--nodes", "2"], "all_reduce", 4 * MIB, "time", 123.5, ""),
    ("R13-1", DGX_A100, ["--nodes", "2"], "all_reduce", 16 * MIB, "time", 274.05, ""),
    ("R13-1", DGX_A100, ["--nodes", "2"], "all_reduce", 128 * MIB, "time", 1483.43, ""),
    ("R13-1", DGX_A100, ["--nodes", "2"], "all_reduce", GIB, "time", 10472.2, ""),
    ("R13-1", DGX_A100, ["--nodes", "2"], "all_reduce", 2 * GIB, "time", 20749.1, ""),
    ("R13-2", DGX_B200, ["--nodes", "2"], "all_reduce", 8, "time", 36.5, "2 x 8 B200, Lambda, IB"),
    ("R13-2", DGX_B200, ["--nodes", "2"], "all_reduce", KIB, "time", 45.33, ""),
    ("R13-2", DGX_B200, ["--nodes", "2"], "all_reduce", 32 * KIB, "time", 45.42, ""),
    ("R13-2", DGX_B200, ["--nodes", "2"], "all_reduce", 256 * KIB, "time", 66.68, ""),
    ("R13-2", DGX_B200, ["--nodes", "2"], "all_reduce", MIB, "time", 115.58, ""),
    ("R13-2", DGX_B200, ["--nodes", "2"], "all_reduce", 4 * MIB, "time", 118.25, ""),
    ("R13-2", DGX_B200, ["--nodes", "2"], "all_reduce", 16 * MIB, "time", 186.86, ""),
    ("R13-2", DGX_B200, ["--nodes", "2"], "all_reduce", 128 * MIB, "time", 596.75, ""),
    ("R13-2", DGX_B200, ["--nodes", "2"], "all_reduce", GIB, "time", 2972.25, ""),
    ("R13-2", DGX_B200, ["--nodes", "2"], "all_reduce", 2 * GIB, "time", 5784.75, ""),
    ("R13-3", GCP_A4, ["--nodes", "2"], "all_reduce", 16 * MIB, "time", 196.3, "2 x GCP A4, dstack's run"),
    ("R13-3", GCP_A4, ["--nodes", "2"], "all_reduce", 128 * MIB, "time", 638.5, ""),
    ("R13-3", GCP_A4, ["--nodes", "2"], "all_reduce", GIB, "time", 3229.9, ""),
    ("R13-3", GCP_A4, ["--nodes", "2"], "all_reduce", 8 * GIB, "time", 23563, ""),
    ("R14-1", H200, ["--gpus-per-node", "4", "--algo", "ring"], "all_reduce", 8 * GIB, "busbw", 363.3, "4 of 8 H200, Ring"),
    ("R14-1", H200, ["--gpus-per-node", "5", "--algo", "nvls"], "all_reduce", 8 * GIB, "busbw", 414.2, "5 of 8 H200, NVLS"),
    ("R14-1", H200, ["--gpus-per-node", "6", "--algo", "nvls"], "all_reduce", 8 * GIB, "busbw", 435.6, "6 of 8 H200, NVLS"),
    ("R14-1", H200, ["--gpus-per-node", "7", "--algo", "nvls"], "all_reduce", 8 * GIB, "busbw", 460.0, "7 of 8 H200, NVLS"),
    ("R14-1", H200, ["--gpus-per-node", "8", "--algo", "nvls"], "all_reduce", 8 * GIB, "busbw", 473.1, "8 of 8 H200, NVLS"),
    ("R14-2", DGX_B200, ["--gpus-per-node", "4", "--algo", "ring"], "all_reduce", 8 * GIB, "busbw", 673.2, "4 of 8 B200, Ring"),
    ("R14-2", DGX_B200, ["--gpus-per-node", "5", "--algo", "ring"], "all_reduce", 8 * GIB, "busbw", 677.8, "5 of 8 B200, Ring"),
    ("R14-2", DGX_B200, ["--gpus-per-node", "6", "--algo", "nvls"], "all_reduce", 8 * GIB, "busbw", 778.2, "6 of 8 B200, NVLS"),
    ("R14-2", DGX_B200, ["--gpus-per-node", "7", "--algo", "nvls"], "all_reduce", 8 * GIB, "busbw", 811.2, "7 of 8 B200, NVLS"),
    ("R14-2", DGX_B200, ["--gpus-per-node", "8", "--algo", "nvls"], "all_reduce", 8 * GIB, "busbw", 838.0, "8 of 8 B200, NVLS"),
    ("R15-1", GCP_A4, ["--nodes", "2"], "all_gather", KIB, "time", 39.23, "2 x GCP A4, all_gather"),
    ("R15-1", GCP_A4, ["--nodes", "2"], "all_gather", 32 * KIB, "time", 39.6, ""),
    ("R15-1", GCP_A4, ["--nodes", "2"], "all_gather", 256 * KIB, "time", 46.8, ""),
    ("R15-1", GCP_A4, ["--nodes", "2"], "all_gather", MIB, "time", 81.56, ""),
    ("R15-1", GCP_A4, ["--nodes", "2"], "all_gather", 4 * MIB, "time", 95.18, ""),
    ("R15-1", GCP_A4, ["--nodes", "2"], "all_gather", 16 * MIB, "time", 132.9, ""),
    ("R15-1", GCP_A4, ["--nodes", "2"], "all_gather", 128 * MIB, "time", 477.4, ""),
    ("R15-1", GCP_A4, ["--nodes", "2"], "all_gather", GIB, "time", 2809.4, ""),
    ("R15-1", GCP_A4, ["--nodes", "2"], "all_gather", 8 * GIB, "time", 21986, ""),
    *[row for gpus, runs in R16_1_TIMES.items()
      for row in timed_runs("R16-1", DGX_H100, ["--nodes", "10", "--gpus-per-node", str(gpus)], runs,
                            (128 * MIB, GIB, 16 * GIB), f"10 x {gpus} H100, {{}}")],
    *timed_runs("R16-2", DGX_H100, [], R16_2_TIMES, (128 * MIB, GIB, 16 * GIB), "8 x H100 of R16, {}"),
    *[("R16-3", DGX_H100, ["--nodes", "2", "--gpus-per-node", str(gpus)], coll, 16 * GIB, "time", us,
       f"2 x {gpus} H100 of R16")
      for gpus, runs in R16_3_TIMES.items() for coll, us in runs],
    ("R17-1", DGX_A100, [], "sendrecv", 128 * MIB, "time", 1211.2, "8 x A100, sendrecv"),
    ("R17-1", DGX_A100, [], "sendrecv", GIB, "time", 5503.4, ""),
]


# The NCCL release each run names (its source, or its log's header), which the model follows; a
# run that names none but is dated takes the newest release of its date (R6-2, landed 2025-05-05:
# 2.26.5, tagged 2025-04-22); the others, and runs naming only a series ("2.2x"), are modeled with
# the newest. NCCL before 2.18 (C5's 2.9.9, R7-3's 2.16.2) is modeled as 2.18, the oldest release
# the model knows.
RUN_NCCL = {"C1": "2.18.5", "C2": "2.18.5", "C5": "2.18", "R1-4": "2.29.7", "R1-6": "2.30.4", "R2-2": "2.26.2",
            "R6-2": "2.26.5",
            "R7-2": "2.26.2", "R7-3": "2.18", "R7-4": "2.26.6", "R7-6": "2.27.3", "R9-1": "2.29.2", "R11-1": "2.20.5",
            "R11-2": "2.25.1", "R12-1": "2.27.3", "R13-2": "2.26.2", "R14-2": "2.27.7", "R16-1": "2.29.2",
            "R16-2": "2.29.2", "R16-3": "2.29.2"}
FORCED_NCCL = None  # --nccl-version: one release for every row


def model(config, flags, collective, size, rid=None):
    """Models one row; a flag written NCCL_NAME=value is the run's setting, passed in the environment."""
    exe = Path(os.environ.get("FAKEGPU_BUILD_DIR") or ROOT / "build") / "fakegpu-model"
    path = ROOT / config if config.startswith("configs/") else CAL / config
    settings = dict(f.split("=", 1) for f in flags if f.startswith("NCCL_"))
    version = FORCED_NCCL or RUN_NCCL.get(rid)
    cmd = [str(exe), "--cluster-config", str(path), "--collective", collective, "-b", str(size), "-e",
           str(size), "--json"] + [f for f in flags if not f.startswith("NCCL_")] + \
        (["--nccl-version", version] if version else [])
    out = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True,
                                    env={**os.environ, **settings}).stdout)
    return {**out["results"][0], "nodes": out["nodes"]}


def size_text(size):
    for unit, scale in (("G", GIB), ("M", MIB), ("K", KIB)):
        if size >= scale:
            return f"{size // scale}{unit}"
    return str(size)


def report(title, rows, median_target, markdown=False):
    """Prints each row's prediction and error, as text or as docs/cost-model.md's tables;
    returns the median and worst absolute error."""
    if markdown:
        print("| id | run | row | measured | predicted | error | NCCL's choice as modeled |")
        print("|---|---|---|---|---|---|---|")
    else:
        print(f"# {title}")
        print(f"{'id':<5} {'collective':<15} {'size':>6} {'metric':<6} {'predicted':>10} {'measured':>10} {'error':>7}  "
              f"{'algo/proto':<15} note")
    errors = []
    regimes = {}  # (sizes, scope) -> absolute errors
    last_id = None
    for rid, config, flags, coll, size, metric, measured, note in rows:
        r = model(config, flags, coll, size, rid)
        predicted = r["time_us"] if metric == "time" else r["busbw_gbs"]
        err = (predicted - measured) / measured
        errors.append(abs(err))
        regimes.setdefault((regime_of(size), "one node" if r["nodes"] == 1 else "across nodes"), []).append(abs(err))
        choice = r["algorithm"] + "/" + r["protocol"]
        if markdown:
            shown_id = rid if rid != last_id else ""
            print(f"| {shown_id} | {note} | {coll} {size_text(size)} {metric} | {measured:.2f} | {predicted:.2f} | "
                  f"{err:+.1%} | {choice} |")
        else:
            print(f"{rid:<5} {coll:<15} {size_text(size):>6} {metric:<6} {predicted:>10.2f} {measured:>10.2f} {err:>+7.1%}  "
                  f"{choice:<15} {note}")
        last_id = rid
    median, worst = statistics.median(errors), max(errors)
    beyond = sum(e > WORST_TARGET for e in errors)
    summary = (f"rows {len(errors)}: median |error| {median:.1%}, worst {worst:.1%}, {beyond} beyond 25% "
               f"(targets: {median_target:.0%}, 25%)")
    print(f"\n{summary}\n" if markdown else f"{summary}")
    print_regimes(regimes, markdown)
    return median, worst


WORST_TARGET = 0.25  # the most any row should be off; printed, not enforced (see the docstring)

SIZE_REGIMES = (("small, < 64 KiB", 64 * KIB), ("mid, 64 KiB to 64 MiB", 64 * MIB), ("large, >= 64 MiB", None))


def regime_of(size):
    return next(name for name, below in SIZE_REGIMES if below is None or size < below)


def print_regimes(regimes, markdown):
    """The rows' errors by message size and by one node or several: where the model stands."""
    if markdown:
        print("| sizes | scope | rows | median error | worst |")
        print("|---|---|---|---|---|")
    for name, _ in SIZE_REGIMES:
        for scope in ("one node", "across nodes"):
            errs = regimes.get((name, scope))
            if not errs:
                continue
            median, worst = statistics.median(errs), max(errs)
            if markdown:
                print(f"| {name} | {scope} | {len(errs)} | {median:.1%} | {worst:.1%} |")
            else:
                print(f"  {name:<22} {scope:<13} rows {len(errs):>3}: median {median:>6.1%}, worst {worst:>6.1%}")
    print()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="fail when a median misses its fidelity target")
    ap.add_argument("--markdown", action="store_true", help="print the tables of docs/cost-model.md")
    ap.add_argument("--nccl-version", help="model every row with this NCCL release instead of the run's own")
    args = ap.parse_args()
    global FORCED_NCCL
    FORCED_NCCL = args.nccl_version
    calibration, _ = report("calibration rows (shared/reference/calibration-measurements.md)", ROWS, 0.05, args.markdown)
    public, _ = report("public runs across the other regimes (sources above WIDER)", WIDER, 0.10, args.markdown)
    if args.check and (calibration > 0.05 or public > 0.10):
        print("fidelity targets missed", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
