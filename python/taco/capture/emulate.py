"""Single-process TP emulation: capture what TP=N collectives would carry, from an unsplit model.

The model runs unchanged. Hooks on the nn.Linear layers whose names match a rule compute, for
every rank r, the tensor rank r would feed to the collective if the layer were split
Megatron-style (tp.py) into N shards:

  kind "row"     (attn out-proj, fc2; input features split):
      fwd  partial output  x[..., cols_r] @ W[:, cols_r]^T (no bias)  all_reduce | reduce_scatter(SP)
      bwd  (SP only) output-gradient sequence shard                   all_gather
  kind "column"  (QKV, fc1; output features split, `chunks` stacked blocks each split):
      fwd  (SP only) input sequence shard                             all_gather
      bwd  partial input gradient  g[..., rows_r] @ W[rows_r, :]      all_reduce | reduce_scatter(SP)

Summed over r the partials give the unsplit layer's output (minus bias) and input gradient.
The hooks run only while the recorder is active, so training speed is unchanged elsewhere.

Rules: (regex on the module's qualified name, kind, site, chunks). The regex must have a named
group `layer` giving the transformer layer index, e.g. r"blocks\\.(?P<layer>\\d+)\\.attn\\.qkv$".
"""
import re

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..errors import CaptureInputError
from ..tp import shard_cols, shard_rows

SITE_KIND = {"attn_qkv": "column", "mlp_fc1": "column", "attn_out": "row", "mlp_out": "row"}


class Rule:
    def __init__(self, pattern, kind, site, chunks=1):
        try:
            self.regex = re.compile(pattern)
        except re.error as ex:
            raise CaptureInputError(f"bad module-name pattern {pattern!r}: {ex}") from None
        if "layer" not in self.regex.groupindex:
            raise CaptureInputError(f"pattern {pattern!r} needs a named group (?P<layer>...) for the layer index")
        if kind not in ("row", "column"):
            raise CaptureInputError(f"rule kind must be row or column, got {kind!r}")
        # chunks: how many equal stacked blocks the output features hold (QKV: 3), or the block
        # sizes when they differ (grouped-query QKV: [q, k, v]).
        self.blocks = [int(b) for b in chunks] if isinstance(chunks, (list, tuple)) else None
        self.chunks = len(self.blocks) if self.blocks else int(chunks)
        if self.chunks < 1 or (self.blocks and min(self.blocks) < 1):
            raise CaptureInputError(f"chunks must be >= 1, got {chunks}")
        self.pattern, self.kind, self.site = pattern, kind, site

    def out_blocks(self, out_features):
        return self.blocks or [out_features // self.chunks] * self.chunks

    @classmethod
    def parse(cls, text):
        """"PATTERN=SITE[:KIND][:CHUNKS]", KIND defaulting from the site (attn_qkv/mlp_fc1 column,
        attn_out/mlp_out row). Example: 'h\\.(?P<layer>\\d+)\\.attn\\.c_attn$=attn_qkv:column:3'."""
        if "=" not in text:
            raise CaptureInputError(f"rule {text!r} is not PATTERN=SITE[:KIND][:CHUNKS]")
        pattern, spec = text.rsplit("=", 1)
        parts = spec.split(":")
        site = parts[0]
        kind = parts[1] if len(parts) > 1 and parts[1] else SITE_KIND.get(site)
        if kind is None:
            raise CaptureInputError(f"rule {text!r}: give the kind (row or column) for site {site!r}")
        try:
            chunks = int(parts[2]) if len(parts) > 2 else 1
        except ValueError:
            raise CaptureInputError(f"rule {text!r}: chunks must be an integer") from None
        return cls(pattern, kind, site, chunks)


class Emulator:
    """Attaches emulation hooks to `model`; detach() removes them."""

    def __init__(self, model, rules, tp_size, recorder, sequence_parallel=False, seq_dim=0):
        if tp_size < 1:
            raise CaptureInputError(f"TP size must be >= 1, got {tp_size}")
        self.tp_size, self.recorder = int(tp_size), recorder
        self.sp, self.seq_dim = bool(sequence_parallel), int(seq_dim)
        self.handles = []
        self.matched = []
        for name, mod in model.named_modules():
            for rule in rules:
                m = rule.regex.search(name)
                if m is None:
                    continue
                if not isinstance(mod, nn.Linear):
                    raise CaptureInputError(f"module {name!r} matches {rule.pattern!r} but is a "
                                            f"{type(mod).__name__}, not an nn.Linear")
                layer = int(m.group("layer"))
                self._check_split(name, mod, rule)
                self.handles.append(mod.register_forward_hook(self._hook(name, mod, rule, layer)))
                self.matched.append((name, rule.kind, rule.site, layer))
                break
        if not self.matched:
            raise CaptureInputError("no nn.Linear module matched the TP rules: "
                                    + ", ".join(repr(r.pattern) for r in rules))

    def _check_split(self, name, mod, rule):
        n = self.tp_size
        if rule.kind == "row" and mod.in_features % n:
            raise CaptureInputError(f"{name}: {mod.in_features} input features do not split over TP={n}")
        if rule.kind == "column" and (sum(rule.out_blocks(mod.out_features)) != mod.out_features
                                      or any(b % n for b in rule.out_blocks(mod.out_features))):
            raise CaptureInputError(f"{name}: {mod.out_features} output features do not split into "
                                    f"{rule.chunks} chunk(s) x TP={n}")

    def detach(self):
        for h in self.handles:
            h.remove()
        self.handles = []

    def _seq_shards(self, t):
        s = t.shape[self.seq_dim]
        if s % self.tp_size:
            raise ValueError(f"sequence length {s} is not divisible by TP={self.tp_size} (sequence parallel)")
        return t.chunk(self.tp_size, dim=self.seq_dim)

    def _record(self, t, layer, site, direction, collective, rank, module):
        self.recorder.record(t, layer=layer, site=site, direction=direction, collective=collective,
                             tp_rank=rank, tp_size=self.tp_size, module=module)

    def _hook(self, name, mod, rule, layer):
        n = self.tp_size

        def on_forward(module, inputs, output):
            if not self.recorder.wants(layer):
                return
            x = inputs[0]
            w = module.weight
            with torch.no_grad():
                if rule.kind == "row":
                    coll = "reduce_scatter" if self.sp else "all_reduce"
                    for r in range(n):
                        cols = shard_cols(mod.in_features, n, r).to(x.device)
                        part = F.linear(x.index_select(-1, cols), w.index_select(1, cols).to(x.dtype))
                        self._record(part, layer, rule.site, "fwd", coll, r, name)
                elif self.sp:
                    for r, shard in enumerate(self._seq_shards(x)):
                        self._record(shard, layer, rule.site, "fwd", "all_gather", r, name)
            if not (output.requires_grad and torch.is_grad_enabled()):
                return
            step = self.recorder.step

            def on_grad(g):
                if not (self.recorder.wants(layer) and self.recorder.step == step):
                    return
                with torch.no_grad():
                    if rule.kind == "row":
                        if self.sp:
                            for r, shard in enumerate(self._seq_shards(g)):
                                self._record(shard, layer, rule.site, "bwd", "all_gather", r, name)
                    else:
                        coll = "reduce_scatter" if self.sp else "all_reduce"
                        for r in range(n):
                            rows = shard_rows(rule.out_blocks(mod.out_features), n, r).to(g.device)
                            part = torch.matmul(g.index_select(-1, rows), w.index_select(0, rows).to(g.dtype))
                            self._record(part, layer, rule.site, "bwd", coll, r, name)

            output.register_hook(on_grad)

        return on_forward
