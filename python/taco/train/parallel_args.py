"""The 3D trainer's flags (--pp, --dp, --pp-sim, --dp-sim, --micro-batches, --compress-pp/-dp/-dp-weights)
and their checks, without torch: the trainer checks its arguments before it imports torch, so a bad
flag costs one line and no import (taco.train.parallel runs them)."""
from ..errors import TacoInputError


def add_arguments(p):
    g = p.add_argument_group("pipeline and data parallelism (docs/training.md, 3D)")
    g.add_argument("--pp", type=int, default=0, help="pipeline stages as processes (world = TP x DP x PP)")
    g.add_argument("--dp", type=int, default=0, help="data-parallel replicas as processes")
    g.add_argument("--pp-sim", type=int, default=0, help="simulate P pipeline stages in this process")
    g.add_argument("--dp-sim", type=int, default=0, help="simulate D data-parallel replicas in this process")
    g.add_argument("--micro-batches", type=int, default=0, help="micro-batches per replica and step (default: P)")
    g.add_argument("--compress-pp", default="none", help="codec for the pipeline sends (both directions)")
    g.add_argument("--compress-dp", default="none", help="codec for the DP gradient reduce-scatter")
    g.add_argument("--compress-dp-weights", default="none",
                   help="codec for the DP all-gather of weight differences (none: the new weights, plain)")


def is_3d(a):
    return max(a.pp, a.dp, a.pp_sim, a.dp_sim, a.micro_batches) > 1 or any(
        v != "none" for v in (a.compress_pp, a.compress_dp, a.compress_dp_weights))


def check_args(a, world):
    """Checks the 3D flags (one TacoInputError line each) and sets a.pp, a.dp, a.micro_batches,
    a.sim3d; returns the number of processes to run (1 when simulated)."""
    for name in ("pp", "dp", "pp_sim", "dp_sim", "micro_batches"):
        if getattr(a, name) < 0:
            raise TacoInputError(f"--{name.replace('_', '-')} must be >= 0, got {getattr(a, name)}")
    procs, sims = max(a.pp, a.dp, 1) > 1, max(a.pp_sim, a.dp_sim, 1) > 1
    if procs and (sims or a.tp_sim > 1):
        raise TacoInputError("--pp/--dp (processes) and --tp-sim/--pp-sim/--dp-sim (simulated) are exclusive")
    if sims and a.tp > 1:
        raise TacoInputError("--pp-sim/--dp-sim simulate every rank: use --tp-sim, not --tp")
    a.sim3d = sims or a.tp_sim > 1
    pp, dp = (max(a.pp_sim, 1), max(a.dp_sim, 1)) if sims else (max(a.pp, 1), max(a.dp, 1))
    if world and not sims:
        if world % (pp * dp):
            raise TacoInputError(f"torchrun started {world} processes, not a multiple of PP x DP = {pp * dp}")
        a.tp = world // (pp * dp)
    a.pp, a.dp = pp, dp
    a.micro_batches = a.micro_batches or pp
    m = a.micro_batches
    if pp > a.layers:
        raise TacoInputError(f"{pp} pipeline stages for {a.layers} layers: each stage needs a layer")
    if m < pp:
        raise TacoInputError(f"--micro-batches {m} is fewer than the {pp} pipeline stages (1F1B needs M >= P)")
    if a.batch % (dp * m):
        raise TacoInputError(f"--batch {a.batch} does not split into {dp} replicas x {m} micro-batches")
    if a.sp:
        raise TacoInputError("--sp runs without pipeline or data parallelism (not supported together)")
    if a.capture_steps or a.capture_last:
        raise TacoInputError("captures (--capture-*) run without pipeline or data parallelism")
    if any(str(v).startswith("powersgd") for v in (a.compress, getattr(a, "compress_bwd", None))):
        raise TacoInputError("the low-rank TP all-reduce (powersgd) runs without pipeline or data parallelism")
    for route, v, n in (("pp", a.compress_pp, pp), ("dp", a.compress_dp, dp), ("dp-weights", a.compress_dp_weights, dp)):
        if v != "none" and n == 1:
            raise TacoInputError(f"--compress-{route} {v} needs {'--pp' if route == 'pp' else '--dp'} "
                                 f"(or its -sim form) of 2 or more")
    a.route_variants = {route: _parse_route(route, v, a.device) for route, v in
                        (("pp", a.compress_pp), ("dp", a.compress_dp), ("dp-weights", a.compress_dp_weights))}
    return 1 if a.sim3d else max(a.tp, 1) * pp * dp


def _parse_route(route, variant, device):
    """None for plain, else the checked codec name (one line for a bad one, or for one without CUDA
    kernels in a --device cuda run: before any rank starts, not at its first send)."""
    from .. import codec as tc
    if variant in (None, "none"):
        return None
    try:
        why = tc.get_codec(variant).gpu_unsupported_reason
    except (ValueError, TypeError) as ex:
        raise TacoInputError(f"--compress-{route}: {ex}") from None
    if device == "cuda" and why:
        raise TacoInputError(f"--compress-{route} {variant} has no CUDA kernels ({why}): run it with --device cpu "
                             "or pick a GPU variant (taco.codec.variants())")
    return variant
