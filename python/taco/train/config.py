"""The model configuration, without torch (the trainer checks arguments before importing it)."""
from dataclasses import asdict, dataclass

ARCHS = ("llama", "gpt2")
DTYPE_NAMES = ("float32", "bfloat16", "float16")


@dataclass
class ModelConfig:
    arch: str = "llama"
    vocab: int = 256
    seq: int = 256
    layers: int = 4
    hidden: int = 512
    heads: int = 8
    kv_heads: int = 0          # 0: = heads (multi-head attention); llama: grouped-query when fewer
    ffn: int = 0               # 0: gpt2 4 x hidden; llama the multiple of 64 nearest 8/3 x hidden
    compute_dtype: str = "float32"
    rope_theta: float = 10000.0
    subspace: int = 0          # > 0: residual-stream updates confined to a k-dim basis (taco.tp.Subspace)

    def __post_init__(self):
        if self.arch not in ARCHS:
            raise ValueError(f"arch must be one of {', '.join(ARCHS)}, got {self.arch!r}")
        if self.kv_heads == 0:
            self.kv_heads = self.heads
        if self.ffn == 0:
            self.ffn = 4 * self.hidden if self.arch == "gpt2" else 64 * round(8 * self.hidden / 3 / 64)
        if self.hidden % self.heads:
            raise ValueError(f"hidden {self.hidden} is not divisible by heads {self.heads}")
        if self.heads % self.kv_heads:
            raise ValueError(f"heads {self.heads} is not a multiple of kv_heads {self.kv_heads}")
        if self.arch == "gpt2" and self.kv_heads != self.heads:
            raise ValueError("the gpt2 architecture has multi-head attention (kv_heads = heads)")
        if self.compute_dtype not in DTYPE_NAMES:
            raise ValueError(f"compute_dtype must be one of {', '.join(DTYPE_NAMES)}")

    @property
    def head_dim(self):
        return self.hidden // self.heads

    def check_tp(self, n):
        for what, v in (("heads", self.heads), ("kv_heads", self.kv_heads), ("ffn", self.ffn)):
            if v % n:
                raise ValueError(f"{what} {v} does not split over TP={n}")

    def name(self):
        kv = f"-{self.kv_heads}KV" if self.kv_heads != self.heads else ""
        sub = f"-sub{self.subspace}" if self.subspace else ""
        return f"{self.arch}-byte-{self.layers}L-{self.hidden}H-{self.heads}A{kv}-{self.ffn}F{sub}-seq{self.seq}"

    def as_dict(self):
        return asdict(self)
