"""``benchmarks/provenance.py``: what a committed results file says of its run."""

from benchmarks import provenance


def test_command_line_keeps_machine_paths_out_and_the_flags_in():
    argv = ["--model", "/tmp/x/model", "--name", "tiny", "--lr", "1e-3"]
    command = provenance.command_line("benchmarks/keydoor_probe.py", argv)
    assert command == "python benchmarks/keydoor_probe.py --model <path> --name tiny --lr 1e-3"


def test_code_commit_is_a_hash_of_this_checkout():
    commit = provenance.code_commit()
    assert commit == "unknown" or len(commit.removesuffix("+dirty")) == 40
