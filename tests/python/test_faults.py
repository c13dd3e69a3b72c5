"""The fault battery of issue 30, as tests: every bad input or fault ends with exit code 2 and
one line on stderr ("taco: error: ..."), never a signal, and leaves no file behind."""
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import h5py
import numpy as np
import pytest

SAMPLES = Path(__file__).resolve().parents[2] / "traces" / "samples"
SP = SAMPLES / "gpt6l512-tp2-sp-layer2-allgather.h5"
STEP30 = SAMPLES / "gpt6l512-tp2-step000030.h5"


def run(taco, *args, **kw):
    return subprocess.run([str(taco), *map(str, args)], capture_output=True, text=True, timeout=300, **kw)


def assert_one_error_line(r, needle=""):
    assert r.returncode == 2, (r.returncode, r.stderr)
    lines = r.stderr.strip("\n").split("\n")
    assert len(lines) == 1 and lines[0].startswith("taco: error: "), r.stderr
    assert needle in lines[0], r.stderr


def leftovers(directory, keep=()):
    return sorted(p.name for p in Path(directory).iterdir() if p.name not in keep)


# ---- corrupt HDF5 ---------------------------------------------------------------------------

def flipped(data, rng, count):
    """Copies of `data` with one bit flipped each: half in the first 16 KiB (superblock, object
    headers, heaps: where libhdf5 crashes), half anywhere."""
    out = []
    for i in range(count):
        b = bytearray(data)
        pos = rng.randrange(min(16384, len(b))) if i % 2 == 0 else rng.randrange(len(b))
        b[pos] ^= 1 << rng.randrange(8)
        out.append((pos, bytes(b)))
    return out


def test_the_battery_case_that_crashed_libhdf5(taco, tmp_path):
    b = bytearray(SP.read_bytes())
    b[5054] ^= 4
    x = tmp_path / "x.h5"
    x.write_bytes(b)
    r = run(taco, "info", x)
    assert_one_error_line(r, str(x))
    assert "crashed" in r.stderr or "HDF5" in r.stderr


@pytest.mark.parametrize("sample,seed", [(SP, 1), (STEP30, 2)])
def test_bit_flips_of_shipped_samples_end_cleanly(taco, tmp_path, sample, seed):
    rng = random.Random(seed)
    data = sample.read_bytes()
    work = tmp_path / "work"
    work.mkdir()
    outcomes = {0: 0, 2: 0}
    for i, (pos, b) in enumerate(flipped(data, rng, 60)):
        x = work / "x.h5"
        x.write_bytes(b)
        # info reads every tensor; study and import also write (and must leave nothing).
        cmd = ["info", x] if i % 3 else (["study", x, "--variants", "fp8-g128", "--out", work / "st", "-q"]
                                         if i % 2 else ["import", x, "--out", work / "t.h5", "-q"])
        r = run(taco, *cmd)
        assert r.returncode in (0, 2), (pos, r.returncode, r.stderr)
        if r.returncode == 2:
            assert_one_error_line(r)
            assert leftovers(work, keep=("x.h5",)) == [], (pos, cmd)
        outcomes[r.returncode] += 1
        for p in (work / "t.h5",):
            p.unlink(missing_ok=True)
        if (work / "st").exists():
            subprocess.run(["rm", "-rf", str(work / "st")], check=True)
    assert outcomes[2] > 0  # some flips are caught (the rest land in data that still decodes)


# ---- writes that fail -----------------------------------------------------------------------

def small_npz(path, n=4, shape=(256, 256)):
    rng = np.random.default_rng(0)
    np.savez(path, **{f"a{i}": rng.standard_normal(shape).astype(np.float32) for i in range(n)})


def limit_file_size(nbytes):
    import resource
    return lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (nbytes, nbytes))


@pytest.mark.parametrize("cmd", ["import", "synth", "study"])
def test_writes_past_the_file_size_limit(taco, tmp_path, cmd):
    src = tmp_path / "in.npz"
    small_npz(src)
    out = tmp_path / "out"
    out.mkdir()
    args = {"import": ["import", src, "--out", out / "t.h5"],
            "synth": ["synth", "--out", out / "t.h5", "--hidden", "512", "--tokens", "512"],
            "study": ["study", src, "--variants", "fp8-g128", "--out", out / "st", "-q"]}[cmd]
    r = subprocess.run([taco, *map(str, args)], capture_output=True, text=True, timeout=300,
                       preexec_fn=limit_file_size(2 << 10 if cmd == "study" else 64 << 10))
    assert_one_error_line(r, "cannot write (File too large)")
    assert "infinite loop" not in r.stderr
    assert leftovers(out) == []


# ---- interrupted commands -------------------------------------------------------------------

def wait_for(pred, seconds=30):
    t0 = time.time()
    while time.time() - t0 < seconds:
        if pred():
            return True
        time.sleep(0.005)
    return False


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupted_import_leaves_nothing(taco, tmp_path, sig):
    src = tmp_path / "in.npz"
    small_npz(src, n=8, shape=(1024, 1024))
    out = tmp_path / "out"
    out.mkdir()
    # default dispositions, as from a terminal: a runner started in the background (nohup, `&`)
    # passes SIGINT on ignored, and taco keeps a signal its parent ignored
    p = subprocess.Popen([taco, "import", str(src), "--out", str(out / "t.h5"), "--gzip", "9"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         preexec_fn=lambda: signal.signal(sig, signal.SIG_DFL))
    assert wait_for(lambda: any(".tmp-" in n for n in os.listdir(out)))  # mid-write
    p.send_signal(sig)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 2, err
    assert err == f"taco: error: interrupted by {signal.Signals(sig).name}\n"
    assert leftovers(out) == []


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_interrupted_study_keeps_the_old_set_and_leaves_no_temp(taco, tmp_path):
    src = tmp_path / "in.npz"
    small_npz(src, n=16, shape=(1024, 1024))
    out = tmp_path / "st"
    r = run(taco, "study", src, "--variants", "bf16", "--out", out, "-q")
    assert r.returncode == 0, r.stderr
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    p = subprocess.Popen([taco, "study", str(src), "--variants", "taco,fp8-g128,mxfp8,int4-g32", "--threads", "1",
                          "--out", str(out), "-q"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert wait_for(lambda: cpu_seconds(p.pid) >= 0.3)  # mid-study: a few seconds of work remain
    assert p.poll() is None
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 2, err
    assert err.count("\n") == 1
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert leftovers(tmp_path, keep=("in.npz",)) == ["st"]


def test_two_studies_on_one_out_never_interleave(taco, tmp_path):
    a, b = tmp_path / "a.npz", tmp_path / "b.npz"
    small_npz(a, n=3)
    small_npz(b, n=5)
    out = tmp_path / "st"
    procs = [subprocess.Popen([taco, "study", str(x), "--variants", v, "--out", str(out), "-q"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for x, v in ((a, "fp8-g128,bf16"), (b, "mxfp8"), (a, "taco"), (b, "bf16"))]
    for p in procs:
        p.communicate(timeout=120)
        assert p.returncode == 0
    # Whichever came last, its files all belong to it.
    import csv
    import json
    rows = list(csv.DictReader(open(out / "results.csv")))
    meta = json.load(open(out / "results.json"))
    assert len(meta["rows"]) == len(rows)
    assert {r["variant"] for r in rows} == set(meta["variants"])
    assert {r["file"] for r in rows} == {i["path"] for i in meta["provenance"]["inputs"]}
    assert leftovers(tmp_path, keep=("a.npz", "b.npz")) == ["st"]


def test_study_out_over_foreign_files_is_refused_before_work(taco, tmp_path):
    src = tmp_path / "in.npz"
    small_npz(src, n=1)
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    r = run(taco, "study", src, "--out", out, "-q")
    assert_one_error_line(r, "holds 'notes.txt', which this command did not write")
    assert leftovers(out) == ["notes.txt"]


# ---- names ----------------------------------------------------------------------------------

def npz_with_member_name(path, name_bytes):
    """An .npz whose one member is named name_bytes + b'.npy' (numpy cannot write such names)."""
    import io
    import zipfile
    buf = io.BytesIO()
    np.save(buf, np.ones((2, 2), dtype=np.float32))
    with zipfile.ZipFile(path, "w") as z:
        info = zipfile.ZipInfo("placeholder.npy")
        z.writestr(info, buf.getvalue())
    data = bytearray(Path(path).read_bytes())
    # Replace the name in the local header and the central directory (same length).
    old = b"placeholder"
    new = (name_bytes + b"x" * len(old))[:len(old)]
    assert data.count(old) == 2
    Path(path).write_bytes(bytes(data).replace(old, new))


@pytest.mark.parametrize("name,needle", [(b"caf\xff", "is not UTF-8 text"), (b"a\x00b", "control character"),
                                         (b"a\x1bc", "control character")])
def test_names_that_are_not_text_are_refused(taco, tmp_path, name, needle):
    p = tmp_path / "n.npz"
    npz_with_member_name(p, name)
    for cmd in (["info", p], ["study", p, "--out", tmp_path / "st", "-q"], ["import", p, "--out", tmp_path / "t.h5"]):
        r = run(taco, *cmd)
        assert_one_error_line(r, needle)
    assert leftovers(tmp_path) == ["n.npz"]


def test_duplicate_safetensors_keys_are_refused(taco, tmp_path):
    import json
    import struct
    entry = {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}
    header = '{"x": %s, "x": %s}' % (json.dumps(entry), json.dumps({**entry, "data_offsets": [8, 16]}))
    p = tmp_path / "dup.safetensors"
    p.write_bytes(struct.pack("<Q", len(header)) + header.encode() + np.arange(4, dtype=np.float32).tobytes())
    assert_one_error_line(run(taco, "info", p), "has the key 'x' twice")


# ---- memory ---------------------------------------------------------------------------------

def peak_rss_mb(taco, *args, env=None):
    """Exit code and peak RSS (MB) of one taco run, its reader processes included."""
    code = ("import resource, subprocess, sys\n"
            "r = subprocess.run(sys.argv[1:], capture_output=True)\n"
            "print(r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024)\n")
    out = subprocess.run([sys.executable, "-c", code, str(taco), *map(str, args)], capture_output=True, text=True,
                         timeout=300, env=env)
    rc, mb = out.stdout.split()
    return int(rc), int(mb)


def zeros_npz(path, nbytes):
    """An .npz holding one float32 array of nbytes zeros, deflated, written in pieces (the test
    itself must not hold the array)."""
    import zipfile
    n = nbytes // 4
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (%d,), }" % n
    header += " " * (-(len(header) + 11) % 64) + "\n"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as z:
        with z.open("a.npy", "w", force_zip64=True) as f:
            f.write(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode())
            block = bytes(1 << 20)
            for _ in range(nbytes >> 20):
                f.write(block)


def test_a_small_archive_claiming_gigabytes_is_refused_cheaply(taco, tmp_path):
    p = tmp_path / "zeros.npz"
    zeros_npz(p, 768 << 20)  # 768 MiB of zeros in under 1 MB
    assert p.stat().st_size < 1 << 20
    r = run(taco, "info", p)
    assert_one_error_line(r, "refused to bound memory")
    rc, mb = peak_rss_mb(taco, "info", p)
    assert rc == 2 and mb < 200, mb
    env = dict(os.environ, TACO_MEMORY_LIMIT="1G")
    assert run(taco, "info", p, env=env).returncode == 0  # the limit can be lifted


def test_compressed_hdf5_zeros_are_refused(taco, tmp_path):
    p = tmp_path / "zeros.h5"
    with h5py.File(p, "w") as f:
        d = f.create_dataset("z", shape=(1 << 27,), dtype=np.float32, chunks=(1 << 20,), compression="gzip")
        zeros = np.zeros(1 << 20, np.float32)
        for i in range(0, 1 << 27, 1 << 20):
            d[i:i + (1 << 20)] = zeros
    assert p.stat().st_size < 2 << 20
    r = run(taco, "info", p)
    assert_one_error_line(r, "refused to bound memory")


def test_a_1d_tensor_in_info_costs_about_what_a_2d_one_does(taco, tmp_path):
    x = np.random.default_rng(0).standard_normal(1 << 24).astype(np.float32)  # 64 MiB
    np.save(tmp_path / "one.npy", x)
    np.save(tmp_path / "two.npy", x.reshape(4096, -1))
    _, one = peak_rss_mb(taco, "info", tmp_path / "one.npy")
    _, two = peak_rss_mb(taco, "info", tmp_path / "two.npy")
    # The values (64 MiB) plus one float per column; before, per-thread copies of the columns
    # made it 5-12x the values.
    assert one < two + 90, (one, two)


def test_absurd_simulations_are_refused(taco, tmp_path):
    p = tmp_path / "two.npz"
    np.savez(p, **{f"x.rank{r}": np.ones((512, 512), np.float32) for r in range(2)})
    assert_one_error_line(run(taco, "study", p, "--collectives", "one_shot", "--tp", "1024", "--out", tmp_path / "o"),
                          "--tp: '1024' is not a TP degree (an integer 2..256)")
    assert_one_error_line(run(taco, "study", p, "--collectives", "all_gather", "--tp", "128", "--out", tmp_path / "o"),
                          "over the limit")
    assert leftovers(tmp_path) == ["two.npz"]


# ---- the command line -----------------------------------------------------------------------

@pytest.mark.parametrize("args,needle", [
    (["stduy"], "unknown command 'stduy'; did you mean 'study'?"),
    (["frobnicate"], "unknown command 'frobnicate' (commands: "),
    (["study", STEP30, "--variant", "taco", "--out", "o"], "unknown option --variant; did you mean --variants?"),
    (["info", STEP30, "--jsn"], "unknown option --jsn; did you mean --json?"),
    (["codec", "encode", "--varient", "taco", "x.npy", "y.bin"], "unknown option --varient; did you mean --variant?"),
    (["info", STEP30, "--frobnicate"], "unknown option --frobnicate ('taco info --help' lists the options)"),
    (["study", STEP30, "--variants", "", "--out", "o"], "--variants: empty value"),
    (["study", STEP30, "--out", ""], "--out: empty value"),
    (["study", STEP30, "--seed", "-1", "--out", "o"], "must be a non-negative integer, got -1"),
    (["synth", "--out", "o.h5", "--seed", "-5"], "must be a non-negative integer, got -5"),
    (["study", STEP30, "--threads", "65536", "--out", "o"], "--threads: must be 0 (all cores) to 1024"),
    (["study", STEP30, "--threads", "40000", "--out", "o"], "--threads: must be 0 (all cores) to 1024"),
    (["synth", "--out", "o.h5", "--tp", "5000"], "--tp: must be in [1, 256]"),
    (["info", STEP30, "--block-size", "100000000000"], "--block-size: must be 1 to 1048576"),
    (["import", STEP30, "--set", "note=x", "--out", "o.h5"], "--set 'note=x': unknown key 'note'"),
    (["import", STEP30, "--out", ""], "--out: empty value"),
    (["import", STEP30, "--out", "."], "--out .: is a directory"),
    (["import", STEP30, "--out", "/dev/null"], "not a regular file"),
    (["import", STEP30, "--out", "no/such/dir/t.h5"], "directory no/such/dir does not exist"),
    (["study", STEP30, "--max-tensors", "-1", "--out", "o"], "--max-tensors: must be a positive integer, got -1"),
    (["study", STEP30, "--max-tensors", "0", "--out", "o"], "--max-tensors: must be a positive integer, got 0"),
])
def test_cli_mistakes_get_one_line_that_says_what_was_meant(taco, tmp_path, args, needle):
    r = run(taco, *args, cwd=tmp_path)
    assert_one_error_line(r, needle)
    assert leftovers(tmp_path) == []


def test_import_onto_a_device_node_leaves_it_alone(taco, tmp_path):
    before = os.stat("/dev/null")
    t0 = time.time()
    r = run(taco, "import", STEP30, "--out", "/dev/null")
    assert_one_error_line(r, "not a regular file")
    assert time.time() - t0 < 5  # refused before the import, not after it
    after = os.stat("/dev/null")
    assert (after.st_ino, after.st_rdev) == (before.st_ino, before.st_rdev)


def test_metadata_bytes_that_are_not_text_do_not_break_json(taco, tmp_path):
    p = tmp_path / "attrs.h5"
    with h5py.File(p, "w") as f:
        d = f.create_dataset("x", data=np.ones((4, 8), np.float32))
        d.attrs["site"] = np.bytes_(b"a\xffb\x01")
    r = run(taco, "info", "--json", p)
    assert r.returncode == 0, r.stderr
    import json
    assert json.loads(r.stdout)[0]["site"] == "a?b?"
    r = run(taco, "study", p, "--variants", "fp8-g128", "--out", tmp_path / "st", "-q")
    assert r.returncode == 0, r.stderr
    import json as j
    assert j.loads((tmp_path / "st" / "results.json").read_text())["rows"][0]["site"] == "a?b?"


# ---- outputs that are inputs ----------------------------------------------------------------

def outputs_over_inputs(tmp_path):
    """(command, files that must come out unchanged) for every writing command pointed at one of
    its inputs: the same path, a symbolic link, a hard link, or a directory that holds it."""
    x = tmp_path / "x.npy"
    np.save(x, np.random.default_rng(1).standard_normal((4, 256)).astype(np.float32))
    (tmp_path / "soft.npy").symlink_to(x)
    os.link(x, tmp_path / "hard.npy")
    w = tmp_path / "x.bin"
    w.write_bytes(bytes(1088))
    d = tmp_path / "dump"
    d.mkdir()
    np.save(d / "a.npy", np.ones((4, 8), np.float32))
    t = tmp_path / "t.h5"
    t.write_bytes(STEP30.read_bytes())
    st = tmp_path / "st"
    st.mkdir()
    (st / "selection.json").write_text('{"choices": [], "candidates": []}')
    (st / "report").mkdir()
    np.save(st / "report" / "r.npy", np.ones((4, 8), np.float32))
    res = tmp_path / "res"
    res.mkdir()
    (res / "results.csv").write_text("garbage\n")
    bench = tmp_path / "bench.json"
    bench.write_bytes((SAMPLES.parents[1] / "bench" / "records" / "2026-12-02-h200-v62-bench.json").read_bytes())
    return [
        (["codec", "encode", "-v", "taco", x, x], [x]),
        (["codec", "encode", "-v", "taco", x, f"{tmp_path}/./x.npy"], [x]),
        (["codec", "encode", "-v", "taco", x, tmp_path / "soft.npy"], [x]),
        (["codec", "encode", "-v", "taco", x, tmp_path / "hard.npy"], [x]),
        (["codec", "decode", "-v", "taco", "--shape", "4,256", w, w], [w]),
        (["codec", "cast", "-f", "e4m3", x, tmp_path / "hard.npy"], [x]),
        (["import", t, "--out", t], [t]),
        (["import", d, "--out", d / "a.npy"], [d / "a.npy"]),
        (["import", x, "--sidecar", tmp_path / "side.json", "--out", tmp_path / "side.json"],
         [tmp_path / "side.json"]),
        (["study", t, "--config", st / "selection.json", "--out", st], [st / "selection.json"]),
        (["study", st / "report", "--out", st], [st / "report" / "r.npy"]),
        (["report", res, "--out", res], [res / "results.csv"]),
        (["model", "--paper", "--bench", bench, "--json", bench], [bench]),
    ]


def test_an_output_that_is_an_input_is_refused_before_anything(taco, tmp_path):
    (tmp_path / "side.json").write_text("{}")
    for args, keep in outputs_over_inputs(tmp_path):
        before = {p: p.read_bytes() for p in keep}
        listing = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*"))
        r = run(taco, *args)
        assert_one_error_line(r)
        assert "is the input" in r.stderr or "holds the input" in r.stderr, (args, r.stderr)
        assert {p: p.read_bytes() for p in keep} == before, args
        assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")) == listing, args


# ---- corrupt metadata and large headers ---------------------------------------------------------

STEP571 = SAMPLES / "gpt6l512-tp2-step000571.h5"


def test_a_flipped_string_length_in_a_real_trace_is_refused_in_bounded_memory(taco, tmp_path):
    # One bit of the length of a variable-length string attribute (extra.shape_in_model): the
    # string then claims 2 GiB of an 8 MB file, and libhdf5 took 4.1 GB to read it.
    b = bytearray(STEP571.read_bytes())
    b[1113406] ^= 1 << 7
    x = tmp_path / "x.h5"
    x.write_bytes(b)
    for cmd in (["info", x], ["study", x, "--variants", "fp8-g128", "--out", tmp_path / "st", "-q"],
                ["import", x, "--out", tmp_path / "t.h5", "-q"]):
        r = run(taco, *cmd)
        assert_one_error_line(r, "extra.shape_in_model")
        assert "more memory than the file can hold" in r.stderr
        rc, mb = peak_rss_mb(taco, *cmd)
        assert rc == 2 and mb < 400, (cmd, mb)
    assert leftovers(tmp_path) == ["x.h5"]


def safetensors_of_many(path, n):
    import json
    import struct
    header = json.dumps({f"t{i}": {"dtype": "F32", "shape": [1], "data_offsets": [4 * i, 4 * i + 4]}
                         for i in range(n)}, separators=(",", ":")).encode()
    path.write_bytes(struct.pack("<Q", len(header)) + header + np.ones(n, np.float32).tobytes())


def cpu_seconds_of(taco, *args):
    """CPU seconds (user + system) of one taco run that must succeed: the fastest of two."""
    code = ("import resource, subprocess, sys\n"
            "r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL)\n"
            "u = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
            "print(r.returncode, u.ru_utime + u.ru_stime)\n")
    best = None
    for _ in range(2):
        out = subprocess.run([sys.executable, "-c", code, str(taco), *map(str, args)], capture_output=True,
                             text=True, timeout=600).stdout.split()
        assert out[0] == "0"
        best = float(out[1]) if best is None else min(best, float(out[1]))
    return best


def test_info_on_many_tensors_costs_time_linear_in_their_number(taco, tmp_path):
    # 4x the tensors cost about 4x the time; the quadratic header parse made it 40x (100,000
    # tensors took 126 s). CPU time, so that a busy machine does not decide.
    safetensors_of_many(tmp_path / "a.safetensors", 10000)
    safetensors_of_many(tmp_path / "b.safetensors", 40000)
    small, large = cpu_seconds_of(taco, "info", tmp_path / "a.safetensors"), \
        cpu_seconds_of(taco, "info", tmp_path / "b.safetensors")
    assert large < 8 * small + 0.1, (small, large)


def test_decode_of_a_shape_its_wire_cannot_hold_is_refused(taco, tmp_path):
    x = tmp_path / "x.npy"
    np.save(x, np.ones((4, 256), np.float32))
    assert run(taco, "codec", "encode", "-v", "taco", x, tmp_path / "w.bin").returncode == 0
    for shape, needle in (("999999999,999999999", "--shape 999999999,999999999: "),
                          ("999999999999,999999999999", "--shape '999999999999,999999999999': too many")):
        r = run(taco, "codec", "decode", "-v", "taco", "--shape", shape, tmp_path / "w.bin", tmp_path / "y.npy")
        assert_one_error_line(r, needle)
    assert leftovers(tmp_path) == ["w.bin", "x.npy"]


def test_bench_outputs_are_two_files_checked_before_measuring(taco, tmp_path):
    # --json and --csv naming one file (as given, through ./, or a hard link) would leave only the
    # CSV: refused with one line before any measurement (so on any build), nothing written.
    j = tmp_path / "r.json"
    j.write_text("{}")
    os.link(j, tmp_path / "hard.csv")
    for csv in (j, f"{tmp_path}/./r.json", tmp_path / "hard.csv"):
        r = run(taco, "bench", "--json", j, "--csv", csv)
        assert_one_error_line(r)
        assert "is also the --json output" in r.stderr, (csv, r.stderr)
        assert j.read_text() == "{}"
    r = run(taco, "bench", "--json", tmp_path / "missing" / "r.json")
    assert_one_error_line(r)
    assert "--json" in r.stderr and "does not exist" in r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hard.csv", "r.json"]
