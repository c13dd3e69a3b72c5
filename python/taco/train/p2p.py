"""Compressed point-to-point transfers (pipeline stage boundaries) over torch.distributed, and the
same transfer simulated in one process.

    import taco.train.p2p as tp2p
    tp2p.sendrecv(x, dst=peer)                        # send x to rank `peer` (of `group`)
    y = tp2p.sendrecv(like=t, src=peer)               # receive a tensor shaped like t
    y = tp2p.sendrecv(x, dst=a, like=t, src=b)        # both, in one batch (no deadlock under NCCL)
    y = tp2p.transfer(x, "fp8-g128", feedback=fb, key=k)   # simulated: what a receiver decodes

A message is the codec's wire of the whole tensor ([rows, cols] view, cols = the last dimension,
one chunk); the receiver decodes it into the tensor's dtype. variant None / "none" sends the
tensor's own bytes. An `ef:<v>` variant keeps one float32 residual per (key, rank, "p2p") in a
taco.dist.Feedback: the sender's rank and the stream key (a pipeline keys a stream per boundary
and direction). The simulated transfer runs the same codec calls on the same bits, so a
simulated pipeline gives the processes' numbers.
"""
import torch
import torch.distributed as dist

from .. import codec as tc
from .. import dist as td

__all__ = ["sendrecv", "transfer", "wire_bytes"]


def _codec(variant):
    return None if td._plain(variant) else tc.get_codec(variant)


def wire_bytes(x, variant):
    """Bytes one transfer of x puts on the wire."""
    c = _codec(variant)
    if c is None:
        return x.numel() * x.element_size()
    return c.chunk_bytes(*td._rows_cols(x))


def _encode(x, variant, feedback, key, rank):
    """x's wire (uint8); with an ef: variant, through the residual (key, rank, "p2p")."""
    td._check(x, variant)
    c = _codec(variant)
    if c is None:
        return x.detach().contiguous().view(-1).view(torch.uint8)
    if c.feedback and feedback is None:
        raise ValueError(f"variant {variant!r} is error feedback: pass a taco.dist.Feedback (and a stream key)")
    rows, cols = td._rows_cols(x)
    wire = td._u8(c.chunk_bytes(rows, cols), x)
    flat, stream = x.detach().contiguous().view(-1), tc._stream(x)
    if c.feedback:
        res = feedback.get((key, rank, "p2p"), x, x.numel())
        c.encode_ef(td.P(flat), td.P(res), td.P(wire), 1, rows, cols, stream)
    else:
        c.encode(td.P(flat), td.P(wire), 1, rows, cols, stream)
    return wire


def _empty_wire(like, variant):
    return td._u8(wire_bytes(like, variant), like)


def _decode(wire, like, variant):
    c = _codec(variant)
    if c is None:
        return wire.view(like.dtype).view(like.shape).clone()
    out = td._out_like(like)
    rows, cols = td._rows_cols(like)
    c.decode_reduce([td.P(wire)], td.P(out.view(-1)), 1, rows, cols, tc._stream(like))
    return out


def transfer(x, variant=None, *, feedback=None, key=None, rank=0):
    """The tensor a receiver decodes when rank `rank` sends x (a simulated send/recv)."""
    return _decode(_encode(x, variant, feedback, key, rank), x, variant)


def sendrecv(x=None, dst=None, like=None, src=None, variant=None, group=None, *, feedback=None, key=None):
    """Sends x to rank dst and/or receives a tensor shaped like `like` from rank src (ranks of
    `group`), in one batch of isend/irecv, and waits for both. Returns the received tensor, or
    None. `key` names the sent stream for error feedback."""
    if (x is None) != (dst is None) or (like is None) != (src is None):
        raise ValueError("sendrecv: give x with dst, like with src, or both pairs")
    g = td._Group(group)
    ops, wire = [], None
    if x is not None:
        ops.append(dist.P2POp(dist.isend, _encode(x, variant, feedback, key, g.rank), g.global_rank(dst), group))
    if like is not None:
        wire = _empty_wire(like, variant)
        ops.append(dist.P2POp(dist.irecv, wire, g.global_rank(src), group))
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    return None if wire is None else _decode(wire, like, variant)
