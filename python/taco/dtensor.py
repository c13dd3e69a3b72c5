"""Compressed tensor-parallel styles for PyTorch's DTensor plans (torch >= 2.5).

    from torch.distributed.tensor.parallel import parallelize_module
    import taco.tp
    comp = taco.tp.Compression("taco")                     # or Compression.from_selection(path)
    plan = taco.tp.compress_plan(model.model, model.config.base_model_tp_plan, comp)
    parallelize_module(model.model, mesh, plan)            # mesh: a 1-D TP DeviceMesh

`ColwiseParallel`, `RowwiseParallel` and `SequenceParallel` stand where torch's styles of those
names stand in a `parallelize_module` plan and shard the parameters as they do (DTensors: the
column-parallel weight and bias Shard(0), the row-parallel weight Shard(1) and bias Replicate), so
optimizers, gradient clipping and checkpoints see what they would see under torch's styles. What
differs is who moves the activations: the four TP collectives run through taco.dist with the
codec the Compression object assigns to the module's (site, direction), and error feedback keeps
one residual per module and direction.

    module                    forward                       backward
    ColwiseParallel()         identity                      all-reduce of the input gradient
      input_layouts=Shard(1)  all-gather of the sequence    reduce-scatter of the input gradient
    RowwiseParallel()         all-reduce of partial sums    identity
      output_layouts=Shard(1) reduce-scatter of the sums    all-gather of the output gradient
    SequenceParallel()        torch's own: a norm on sequence shards moves no activations

The local computation is the one DTensor runs: F.linear on the local weight shard (the weight's
`to_local()`, so its gradient is a DTensor of the same placement). With bf16 models and the
"bf16" variant, a run under these styles equals the run under torch's styles bit for bit
(tests/dtensor). A row-parallel bias is added after the reduction, as Megatron does; a
sequence-sharded row-parallel output takes no bias.

`compress_plan` turns a plan of Hugging Face style strings ("colwise", "rowwise",
"sequence_parallel", as in `config.base_model_tp_plan`) or of torch's style objects into these
styles, one per module (wildcards expanded), naming each module's TP site from its name
(q_proj -> attn_qkv, o_proj -> attn_out, gate_proj/up_proj -> mlp_fc1, down_proj -> mlp_out;
`sites=` for other names). Other torch styles (PrepareModuleInput, ...) pass through unchanged:
their redistributions stay DTensor's plain collectives.
"""
import fnmatch
import re
import types

import torch
import torch.nn as nn
import torch.nn.functional as F

from . import tp as ttp
from .errors import TacoInputError

try:
    from torch.distributed.tensor import DTensor, Replicate, Shard, distribute_tensor
    from torch.distributed.tensor.parallel import ParallelStyle
    from torch.distributed.tensor.parallel import ColwiseParallel as _TorchColwise
    from torch.distributed.tensor.parallel import RowwiseParallel as _TorchRowwise
    from torch.distributed.tensor.parallel import SequenceParallel as _TorchSequenceParallel
except ImportError:  # torch < 2.5 has no public torch.distributed.tensor
    raise TacoInputError(f"taco's DTensor styles need torch >= 2.5 (torch.distributed.tensor); this is torch "
                         f"{torch.__version__}") from None

__all__ = ["ColwiseParallel", "RowwiseParallel", "SequenceParallel", "compress_plan", "site_of", "SITE_NAMES"]

# The last component of a module's name -> its TP site (the names of Hugging Face, Megatron and
# torchtitan models). `compress_plan(..., sites=...)` covers the rest.
SITE_NAMES = {
    "attn_qkv": ("q_proj", "k_proj", "v_proj", "qkv_proj", "query_key_value", "wq", "wk", "wv", "query", "key",
                 "value"),
    "attn_out": ("o_proj", "out_proj", "wo"),
    "mlp_fc1": ("gate_proj", "up_proj", "gate_up_proj", "fc1", "w1", "w3", "c_fc", "dense_h_to_4h"),
    "mlp_out": ("down_proj", "fc2", "w2", "dense_4h_to_h"),
}


def site_of(name, sites=None):
    """The TP site of the module called `name`: the first pattern of `sites` ({fnmatch pattern:
    site}) that matches it, else SITE_NAMES by its last component."""
    for pattern, site in (sites or {}).items():
        if fnmatch.fnmatchcase(name, pattern):
            if site not in ttp.SITES:
                raise TacoInputError(f"sites[{pattern!r}] = {site!r} is not a TP site (one of {', '.join(ttp.SITES)})")
            return site
    last = name.rsplit(".", 1)[-1]
    for site, names in SITE_NAMES.items():
        if last in names:
            return site
    raise TacoInputError(f"cannot tell the TP site of module {name!r}: pass sites={{{name!r}: one of "
                         f"{', '.join(ttp.SITES)}}}")


def _layer_of(name):
    """The first integer component of a module name (layers.3.mlp.up_proj -> 3), else 0."""
    m = re.search(r"(?:^|\.)(\d+)(?:\.|$)", name)
    return int(m.group(1)) if m else 0


def _placement(p, what):
    """Replicate, or the sequence dimension of a Shard (Shard(-1) only where named)."""
    if p is None or isinstance(p, Replicate):
        return None
    if isinstance(p, Shard):
        return p.dim
    raise TacoInputError(f"{what}: placement {p} is not supported (Replicate or Shard(sequence dim))")


def _check_linear(module, style):
    if not isinstance(module, nn.Linear):
        raise TacoInputError(f"taco.tp.{style} shards nn.Linear modules; got {type(module).__name__}")


def _tp_for(mesh, compression):
    if mesh.ndim != 1:
        raise TacoInputError(f"taco's TP styles take a 1-D device mesh (the TP dimension); got {mesh.ndim}-D")
    return ttp.TP.process(mesh.get_group(), compression)


def _seq_collective(fn, x, dim, tp, where):
    """A sequence-parallel collective on dim `dim` of x: taco.dist cuts dim 0, so move it there."""
    if dim in (0, -x.dim()):
        return fn(x.contiguous(), tp, where)
    y = fn(x.movedim(dim, 0).contiguous(), tp, where)
    y = y[0] if isinstance(y, list) else y
    return y.movedim(0, dim)


def _local(x):
    return x.to_local() if isinstance(x, DTensor) else x


class _Compressed(ParallelStyle):
    """What the two linear styles share: the Compression object, the module's site and name."""
    column = True

    def __init__(self, compression, *, site=None, name=None):
        super().__init__()
        if not isinstance(compression, ttp.Compression):
            raise TypeError(f"compression must be a taco.tp.Compression, got {type(compression).__name__}")
        if site is not None and site not in ttp.SITES:
            raise TacoInputError(f"unknown TP site {site!r} (one of {', '.join(ttp.SITES)})")
        self.compression, self.name = compression, name
        self.site = site or (site_of(name) if name else None)
        if self.site is not None and (self.site in ttp.COLUMN_SITES) != self.column:
            kind, sites = ("column", ttp.COLUMN_SITES) if self.column else ("row", ttp.ROW_SITES)
            raise TacoInputError(f"module {name or '?'}: site {self.site} is not a {kind}-parallel site "
                                 f"({', '.join(sites)})")

    def _where(self, module):
        if self.site is None:
            raise TacoInputError(f"taco.tp.{type(self).__name__} needs site= (or name=) to know its TP site")
        name = self.name or f"<{type(module).__name__} at {id(module):#x}>"
        return (_layer_of(name), self.site, name)


class ColwiseParallel(_Compressed):
    """torch's ColwiseParallel with the input-gradient all-reduce (or, with input_layouts=Shard(d),
    the forward all-gather and backward reduce-scatter) compressed by taco. Output: the local
    shard of the last dimension (a DTensor Shard(-1) if use_local_output=False)."""

    def __init__(self, compression, *, site=None, name=None, input_layouts=None, output_layouts=None,
                 use_local_output=True):
        super().__init__(compression, site=site, name=name)
        self.seq_dim = _placement(input_layouts, "ColwiseParallel input_layouts")
        if output_layouts is not None and not (isinstance(output_layouts, Shard) and output_layouts.dim == -1):
            raise TacoInputError(f"ColwiseParallel output_layouts {output_layouts}: only Shard(-1) (the column "
                                 "shards) is supported; a gathered output is not a TP site")
        self.use_local_output = use_local_output

    def _apply(self, module, device_mesh):
        _check_linear(module, "ColwiseParallel")
        where = self._where(module)
        tp = _tp_for(device_mesh, self.compression)
        for pname, p in list(module.named_parameters(recurse=False)):
            module.register_parameter(pname, nn.Parameter(distribute_tensor(p, device_mesh, [Shard(0)])))
        seq_dim, local_out = self.seq_dim, self.use_local_output

        def forward(mod, x):
            x = _local(x)
            if seq_dim is None:
                x = ttp.copy_to_tensor_model_parallel_region(x, tp, where)[0]
            else:
                x = _seq_collective(ttp.gather_from_sequence_parallel_region, x, seq_dim, tp, where)
            y = F.linear(x, mod.weight.to_local(), None if mod.bias is None else mod.bias.to_local())
            return y if local_out else DTensor.from_local(y, device_mesh, [Shard(-1)], run_check=False)

        module.forward = types.MethodType(forward, module)
        return module


class RowwiseParallel(_Compressed):
    """torch's RowwiseParallel with the partial-sum all-reduce (or, with output_layouts=Shard(d),
    the reduce-scatter forward and all-gather backward) compressed by taco. Input: the local shard
    of the last dimension (a local tensor or a DTensor Shard(-1))."""
    column = False

    def __init__(self, compression, *, site=None, name=None, input_layouts=None, output_layouts=None,
                 use_local_output=True):
        super().__init__(compression, site=site, name=name)
        if input_layouts is not None and not (isinstance(input_layouts, Shard) and input_layouts.dim == -1):
            raise TacoInputError(f"RowwiseParallel input_layouts {input_layouts}: only Shard(-1) is supported")
        self.seq_dim = _placement(output_layouts, "RowwiseParallel output_layouts")
        self.use_local_output = use_local_output

    def _apply(self, module, device_mesh):
        _check_linear(module, "RowwiseParallel")
        where = self._where(module)
        if self.seq_dim is not None and module.bias is not None:
            raise TacoInputError(f"module {where[2]}: a sequence-sharded RowwiseParallel output takes no bias")
        tp = _tp_for(device_mesh, self.compression)
        module.register_parameter("weight", nn.Parameter(distribute_tensor(module.weight, device_mesh, [Shard(1)])))
        if module.bias is not None:
            module.register_parameter("bias", nn.Parameter(distribute_tensor(module.bias, device_mesh, [Replicate()])))
        seq_dim, local_out = self.seq_dim, self.use_local_output

        def forward(mod, x):
            y = F.linear(_local(x), mod.weight.to_local())
            if seq_dim is None:
                y = ttp.reduce_from_tensor_model_parallel_region([y], tp, where)
            else:
                y = _seq_collective(lambda t, tp_, w: ttp.reduce_scatter_to_sequence_parallel_region([t], tp_, w),
                                    y, seq_dim, tp, where)
            if mod.bias is not None:
                y = y + mod.bias.to_local()
            if local_out:
                return y
            return DTensor.from_local(y, device_mesh, [Replicate() if seq_dim is None else Shard(seq_dim)],
                                      run_check=False)

        module.forward = types.MethodType(forward, module)
        return module


class SequenceParallel(_TorchSequenceParallel):
    """torch's SequenceParallel (norms and dropout on sequence shards: no activation crosses ranks
    there), returning local shards by default so that it composes with the styles above, whose
    sequence-parallel all-gather and reduce-scatter carry the compressed traffic."""

    def __init__(self, *, sequence_dim=1, use_local_output=True):
        super().__init__(sequence_dim=sequence_dim, use_local_output=use_local_output)


def _matches(model, pattern):
    """Names of the modules of `model` that a plan key names (torch's rule: '*' within a component)."""
    atoms = pattern.split(".")
    out = []
    for name, _ in model.named_modules():
        parts = name.split(".") if name else []
        if len(parts) == len(atoms) and all(fnmatch.fnmatchcase(p, a) for p, a in zip(parts, atoms)):
            out.append(name)
    return out


_STRINGS = {"colwise": "col", "rowwise": "row", "sequence_parallel": "seq"}


def compress_plan(model, plan, compression, *, sites=None):
    """A parallelize_module plan for `model` with taco's styles where `plan` (keys as in
    parallelize_module, values Hugging Face style strings or torch ParallelStyle objects) has
    column-parallel, row-parallel and sequence-parallel entries; one entry per module, keyed by
    its name. Raises TacoInputError for a key that names no module, a style string taco does not
    compress, or a module whose TP site cannot be told."""
    if not isinstance(compression, ttp.Compression):
        raise TypeError(f"compression must be a taco.tp.Compression, got {type(compression).__name__}")
    out = {}
    for key, style in plan.items():
        names = _matches(model, key)
        if not names:
            raise TacoInputError(f"plan entry {key!r} names no module of the model")
        if isinstance(style, str):
            kind = _STRINGS.get(style)
            if kind is None:
                raise TacoInputError(f"plan entry {key!r}: style {style!r} is not one taco compresses "
                                     f"({', '.join(_STRINGS)})")
            layouts = {}
        elif isinstance(style, (_TorchColwise, _TorchRowwise)):
            kind = "col" if isinstance(style, _TorchColwise) else "row"
            layouts = dict(input_layouts=style.input_layouts[0], output_layouts=style.output_layouts[0],
                           use_local_output=style.use_local_output)
        elif isinstance(style, _TorchSequenceParallel) and not isinstance(style, SequenceParallel):
            kind, layouts = "seq", dict(sequence_dim=style.sequence_sharding[0].dim,
                                        use_local_output=style.use_local_output)
        elif isinstance(style, ParallelStyle):
            kind = None  # PrepareModuleInput and the like: DTensor's own
        else:
            raise TacoInputError(f"plan entry {key!r}: {style!r} is neither a style string nor a ParallelStyle")
        for name in names:
            if kind == "col":
                out[name] = ColwiseParallel(compression, site=site_of(name, sites), name=name, **layouts)
            elif kind == "row":
                out[name] = RowwiseParallel(compression, site=site_of(name, sites), name=name, **layouts)
            elif kind == "seq":
                out[name] = SequenceParallel(**layouts)
            else:
                out[name] = style
    return out
