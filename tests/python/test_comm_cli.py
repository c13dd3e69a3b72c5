"""`taco comm` flag checks that need no GPU: bad values end with one line and exit code 2."""
import subprocess

import pytest


def run(taco, *args):
    return subprocess.run([str(taco), *map(str, args)], capture_output=True, text=True, timeout=60)


@pytest.fixture(scope="module")
def comm(taco):
    if run(taco, "comm", "--help").returncode != 0:
        pytest.skip("this taco has no comm subcommand (built without CUDA)")
    return taco


@pytest.mark.parametrize("args,msg", [
    (["--codec-sms=-1"], "--codec-sms must be >= 0"),
    (["--loopback=-2"], "--loopback must be >= 0"),
    (["-g", "-1"], "-g/--ngpus must be >= 0"),
    (["--nccl-ce", "--loopback", "2"], "--nccl-ce needs NCCL ranks"),
])
def test_bad_comm_flags_exit_2_with_one_line(comm, args, msg):
    r = run(comm, "comm", *args)
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().split("\n")
    assert len(lines) == 1 and lines[0].startswith("taco: error:") and msg in lines[0], r.stderr


def test_codec_sms_is_documented(comm):
    out = run(comm, "comm", "--help").stdout
    assert "--codec-sms" in out and "NCCL kernels" in out


def test_nccl_ce_is_documented(comm):
    out = run(comm, "comm", "--help").stdout
    assert "--nccl-ce" in out and "copy engines" in out
