"""What gets captured and when: a Recorder collects the tensors TP collectives carry.

The TP layers (tp.py) and the emulator (emulate.py) call Recorder.record() at every collective;
the recorder keeps a tensor only while it is active (Recorder.start(step) ... Recorder.stop()),
only for the layers asked for, and optionally only the first `keep_batch` sequences of the
batch, so a capture step of a large run stays a few MiB. Kept tensors are flattened to
[tokens, hidden] (the last dimension stays last) and copied to host memory at once.

Names are "s<step>.l<layer>.<site>.<direction>.<collective>.r<tp_rank>", unique in a trace.
"""
import torch

from .trace_writer import COLLECTIVES, DIRECTIONS, TraceWriter

TORCH_TO_TRACE = {torch.bfloat16: "bf16", torch.float16: "f16", torch.float32: "f32"}


def tensor_to_numpy(t):
    """(numpy array as stored in a trace, trace dtype). bf16/f16 as uint16 bits, exact."""
    t = t.detach()
    if t.dtype not in TORCH_TO_TRACE:
        raise TypeError(f"cannot store dtype {t.dtype} in a taco trace (bf16, f16, f32)")
    dtype = TORCH_TO_TRACE[t.dtype]
    t = t.contiguous().cpu()
    # Always a copy: the caller's tensor may be reused (in-place collectives, optimizer steps).
    if dtype == "f32":
        return t.numpy().copy(), dtype
    return t.view(torch.int16).numpy().view("uint16").copy(), dtype


class Record:
    __slots__ = ("name", "data", "dtype", "meta", "extra")

    def __init__(self, name, data, dtype, meta, extra):
        self.name, self.data, self.dtype, self.meta, self.extra = name, data, dtype, meta, extra

    def key(self):
        m = self.meta
        return (m["step"], m["layer"], m["site"], m["direction"], m["collective"], m["tp_rank"])


class Recorder:
    def __init__(self, model_name, layers=None, keep_batch=None, batch_dim=1, extra=None):
        """layers: iterable of layer indices to keep (None = all). keep_batch: keep only the
        first N sequences along `batch_dim` (None = all). extra: attributes added to every
        tensor (written as extra.<key>)."""
        self.model_name = model_name
        self.layers = None if layers is None else set(int(x) for x in layers)
        self.keep_batch = keep_batch
        self.batch_dim = batch_dim
        self.extra = dict(extra or {})
        self.step = -1
        self.active = False
        self.records = []

    def start(self, step):
        self.step = int(step)
        self.active = True

    def stop(self):
        self.active = False

    def wants(self, layer):
        return self.active and (self.layers is None or layer in self.layers)

    def record(self, tensor, *, layer, site, direction, collective, tp_rank, tp_size, module="", tag=""):
        """Keeps one tensor a collective carries (its input on this rank)."""
        if not self.wants(layer):
            return
        assert direction in DIRECTIONS and collective in COLLECTIVES, (direction, collective)
        t = tensor.detach()
        full_shape = list(t.shape)
        if self.keep_batch is not None and t.dim() >= 3:
            t = t.narrow(self.batch_dim, 0, min(self.keep_batch, t.shape[self.batch_dim]))
        t = t.reshape(-1, t.shape[-1])
        data, dtype = tensor_to_numpy(t)
        meta = {"layer": int(layer), "site": site, "direction": direction, "collective": collective,
                "tp_rank": int(tp_rank), "tp_size": int(tp_size), "step": self.step, "model": self.model_name}
        extra = dict(self.extra)
        extra["shape_in_model"] = str(full_shape)
        if self.keep_batch is not None:
            extra["batch_kept"] = str(min(self.keep_batch, full_shape[self.batch_dim]) if len(full_shape) >= 3
                                      else full_shape[0])
        if module:
            extra["module"] = module
        name = (f"s{self.step}.l{layer}.{site}.{direction}.{collective}.r{tp_rank}" + (f".{tag}" if tag else ""))
        self.records.append(Record(name, data, dtype, meta, extra))

    def take(self):
        """Returns the records kept so far and forgets them."""
        out, self.records = self.records, []
        return out


def write_records(path, records, provenance=None, compression_level=4):
    """Writes records to a taco trace, sorted by (step, layer, site, direction, rank)."""
    records = sorted(records, key=lambda r: (r.meta["step"], r.meta["layer"], r.meta["site"],
                                             r.meta["direction"], r.meta["collective"], r.meta["tp_rank"], r.name))
    with TraceWriter(path, provenance=provenance, compression_level=compression_level) as w:
        for r in records:
            w.add(r.name, r.data, r.dtype, meta=r.meta, extra=r.extra)
        w.commit()
    return len(records)
