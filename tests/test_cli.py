import json

import numpy as np
import pytest
from rosetree.cli import main


def test_demo_prints_tree_and_evidence(capsys):
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert "Elephant" in out and "log evidence" in out and "partitions" in out


def test_fit_csv_with_labels_and_outputs(tmp_path, capsys):
    data = tmp_path / "d.csv"
    rows = ["name,kind,a,b,c", "x,p,1,1,0", "y,p,1,1,0", "z,q,0,0,1", "w,q,0,1,1"]
    data.write_text("\n".join(rows) + "\n")
    nwk, js = tmp_path / "t.nwk", tmp_path / "t.json"
    code = main(
        [
            "fit",
            str(data),
            "--labels",
            "name",
            "--ignore",
            "kind",
            "--newick",
            str(nwk),
            "--json",
            str(js),
        ]
    )
    assert code == 0
    out = capsys.readouterr().out
    assert "log evidence" in out
    assert nwk.read_text().strip() in {"((x,y),(z,w));", "((z,w),(x,y));"}
    doc = json.loads(js.read_text())
    assert doc["n_leaves"] == 4 and np.isfinite(doc["log_evidence"])


@pytest.mark.parametrize(
    ("rows", "extra", "message"),
    [
        (["a,b", "1,x", "0,1"], [], "not a number"),
        (["a,b", "1,0.5", "0,1"], [], "row 0"),
        (["a,b", "1,0", "0,1"], ["--labels", "nope"], "not in"),
        (["a,b", "1,0", "0,1"], ["--gamma", "2"], "gamma"),
    ],
)
def test_errors_are_reported_not_raised(tmp_path, capsys, rows, extra, message):
    data = tmp_path / "d.csv"
    data.write_text("\n".join(rows) + "\n")
    assert main(["fit", str(data), *extra]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    ("model", "rows"),
    [
        ("gaussian", ["a,b", "0.1,0.2", "0.15,0.22", "3.0,2.9", "3.1,3.2"]),
        ("multinomial", ["a,b,c", "3,0,1", "2,0,1", "0,4,0", "0,5,1"]),
    ],
)
def test_other_models_from_the_command_line(tmp_path, capsys, model, rows):
    data = tmp_path / "d.csv"
    data.write_text("\n".join(rows) + "\n")
    nwk = tmp_path / "t.nwk"
    assert main(["fit", str(data), "--model", model, "--newick", str(nwk)]) == 0
    assert "flat clusters     2" in capsys.readouterr().out
    assert "(0,1)" in nwk.read_text()  # the two closest rows are siblings


def test_learned_hyperparameters_from_the_command_line(tmp_path, capsys):
    import rosetree as rt

    data = tmp_path / "d.csv"
    X = np.array([[1, 1, 0, 0]] * 4 + [[0, 0, 1, 1]] * 4 + [[1, 0, 1, 0]] * 2, dtype=float)
    data.write_text("a,b,c,d\n" + "\n".join(",".join(f"{v:g}" for v in r) for r in X) + "\n")
    assert main(["fit", str(data), "--learn", "--mixing", "gamma"]) == 0
    out = capsys.readouterr().out
    est = rt.BayesianRoseTree(mixing="gamma", learn_hyperparameters=True).fit(X)
    assert f"ln p(D|T) = {est.log_evidence_:.4f}" in out
    assert f"gamma = {est.gamma_:.4g}" in out
    a = np.atleast_1d(est.model_.alpha)
    assert f"alpha = {a.min():.3g} .. {a.max():.3g}" in out


def test_version(capsys):
    from rosetree import __version__

    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out.strip() == f"rosetree {__version__}"


@pytest.mark.parametrize("option", ["--newick", "--json"])
def test_an_output_into_a_missing_directory_is_an_error_before_fitting(tmp_path, capsys, option):
    assert main(["demo", option, str(tmp_path / "missing" / "tree.out")]) == 2
    captured = capsys.readouterr()
    assert "the directory does not exist" in captured.err and captured.out == ""


def test_a_closed_pipe_ends_quietly(monkeypatch, tmp_path):
    import os
    import sys

    class ClosedPipe:
        """stdout whose reader has gone away (`| head`), after `lines` writes."""

        def __init__(self, lines):
            self.lines = lines
            self.fd = os.open(tmp_path / "sink", os.O_WRONLY | os.O_CREAT)

        def write(self, text):
            self.lines -= 1
            if self.lines < 0:
                raise BrokenPipeError(32, "Broken pipe")
            return len(text)

        def flush(self):
            pass

        def fileno(self):
            return self.fd

    for lines in (0, 1, 3):  # while announcing the demo, or while printing the tree
        monkeypatch.setattr(sys, "stdout", ClosedPipe(lines))
        assert main(["demo"]) == 1


def test_a_closed_pipe_ends_quietly_in_a_process():
    import subprocess
    import sys

    script = "import sys; from rosetree.cli import main; sys.exit(main(['demo']))"
    with subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    ) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.readline()
        proc.stdout.close()  # the reader goes away, as `| head -1` does
        err = proc.stderr.read().decode()
        code = proc.wait(timeout=60)
    # 0 when the whole output fitted in the pipe's buffer before the reader left.
    assert err == "" and code in (0, 1), (code, err)


def test_a_csv_without_a_header_row_is_detected_or_declared(tmp_path, capsys):
    data = tmp_path / "d.csv"
    data.write_text("1,1,0\n1,1,0\n0,0,1\n0,1,1\n")
    assert main(["fit", str(data)]) == 2
    assert "--no-header" in capsys.readouterr().err
    out = tmp_path / "labels.csv"
    assert main(["fit", str(data), "--no-header", "--labels-out", str(out)]) == 0
    lines = out.read_text().splitlines()
    assert lines[0] == "cluster" and len(lines) == 5  # every row kept, the first included
    assert "[4 leaves" in capsys.readouterr().out


def test_labels_out_names_the_rows(tmp_path):
    data = tmp_path / "d.csv"
    data.write_text("name,a,b,c\nx,1,1,0\ny,1,1,0\nz,0,0,1\nw,0,1,1\n")
    out = tmp_path / "labels.csv"
    assert main(["fit", str(data), "--labels", "name", "--labels-out", str(out)]) == 0
    rows = [line.split(",") for line in out.read_text().splitlines()]
    assert rows[0] == ["name", "cluster"]
    assert [r[0] for r in rows[1:]] == ["x", "y", "z", "w"]
    assert rows[1][1] == rows[2][1] != rows[3][1]
