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
        (["a,b", "1,0.5", "0,1"], ["--model", "bernoulli"], "row 0"),
        (["a,b", "1,0", "0,1"], ["--alpha", "2"], "--alpha sets a prior of --model bernoulli"),
        (["a,b", "1,0", "0,1"], ["--labels", "nope"], "not in"),
        (["a,b", "1,0", "0,1"], ["--gamma", "2"], "gamma"),
    ],
)
def test_errors_are_reported_not_raised(tmp_path, capsys, rows, extra, message):
    data = tmp_path / "d.csv"
    data.write_text("\n".join(rows) + "\n")
    assert main(["fit", str(data), *extra]) == 2
    assert message in capsys.readouterr().err


def test_the_model_is_chosen_from_the_data_by_default(tmp_path, capsys):
    data = tmp_path / "d.csv"
    data.write_text("\n".join(["a,b", "0.1,0.2", "0.15,0.22", "3.0,2.9", "3.1,3.2"]) + "\n")
    assert main(["fit", str(data)]) == 0
    assert "model             NormalGamma (chosen for real-valued data)" in capsys.readouterr().out
    data.write_text("\n".join(["a,b", "1,0", "1,0", "0,1"]) + "\n")
    assert main(["fit", str(data)]) == 0
    assert "BetaBernoulli (chosen for binary data)" in capsys.readouterr().out


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
        assert main(["demo"]) == 0


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
    # The reader chose to stop reading: success, whether or not the output fitted in the
    # pipe's buffer before it left.
    assert err == "" and code == 0, (code, err)


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


def write_csv(path, X, names=None):
    """``X`` as a CSV with a header (and a first column ``name``), empty cells for NaN."""
    header = ([] if names is None else ["name"]) + [f"x{j}" for j in range(X.shape[1])]
    lines = [",".join(header)]
    for i, row in enumerate(X):
        cells = ["" if np.isnan(v) else repr(float(v)) for v in row]
        lines.append(",".join(cells if names is None else [names[i], *cells]))
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def timed(newick, names, time):
    """The tree of a Newick text with the times ``time(distance from the leaves)``."""
    import rosetree as rt

    tree = rt.Tree.from_newick(newick, labels=names)  # heights: the distances
    return rt.Tree(tree.n_leaves, tree.children[tree.n_leaves :], time(tree.heights))


@pytest.fixture
def blobs(tmp_path):
    """Eight centred rows in two groups of four, named, as a CSV."""
    rng = np.random.default_rng(0)
    X = np.vstack([rng.normal(-1.5, 0.3, (4, 2)), rng.normal(1.5, 0.3, (4, 2))])
    names = [f"r{i}" for i in range(8)]
    return X, names, write_csv(tmp_path / "d.csv", X, names)


@pytest.mark.parametrize(
    ("extra", "params"),
    [
        ([], {}),
        (
            ["--inference", "smc-priorpost", "--particles", "8", "--seed", "3"],
            {"inference": "smc-priorpost", "n_particles": 8, "random_state": 3},
        ),
    ],
)
def test_the_coalescent_from_the_command_line(tmp_path, capsys, blobs, extra, params):
    import rosetree as rt

    X, names, data = blobs
    nwk, js, lab = tmp_path / "t.nwk", tmp_path / "t.json", tmp_path / "l.csv"
    outputs = ["--newick", str(nwk), "--json", str(js), "--labels-out", str(lab)]
    argv = ["fit", data, "--labels", "name", "--family", "coalescent", *extra, *outputs]
    assert main(argv) == 0
    out = capsys.readouterr().out
    est = rt.KingmanCoalescent(**params).fit(X)
    assert f"ln p(x, pi) = {est.log_joint_:.4f}" in out
    assert ("SMC estimate, 8 particles" in out) == bool(extra)
    assert f"flat clusters     {est.n_clusters_} (r >= 0.5 cut under the DP prior)" in out
    # The Newick has the coalescence times as branch lengths: read back, the same log joint.
    back = timed(nwk.read_text().strip(), names, lambda distance: -distance)
    model = {"Lambda": est.Lambda_, "noise": est.noise_}
    assert rt.coalescent_log_joint(X, back, **model) == pytest.approx(est.log_joint_, rel=1e-9)
    doc = json.loads(js.read_text())
    assert doc["family"] == "coalescent" and doc["log_joint"] == est.log_joint_
    assert doc["root"]["height"] == est.tree_.heights[-1] < 0
    assert [r.split(",")[1] for r in lab.read_text().splitlines()[1:]] == [
        str(k) for k in est.labels_
    ]


def test_the_coalescent_with_categories_and_learned_rates(tmp_path, capsys):
    import rosetree as rt

    X = np.array([[0, 1, 2], [0, 1, 2], [0, 1, 1], [2, 0, 0], [2, 0, np.nan], [1, 0, 0]])
    data = write_csv(tmp_path / "d.csv", X)
    argv = ["fit", data, "--family", "coalescent", "--likelihood", "multinomial", "--learn"]
    assert main([*argv, "--lambda", "0.5", "--n-clusters", "2"]) == 0
    out = capsys.readouterr().out
    est = rt.KingmanCoalescent("multinomial", Lambda=0.5, learn_hyperparameters=True).fit(X)
    assert f"ln p(x, pi) = {est.log_joint_:.4f}" in out
    assert f"learned           Lambda = {est.Lambda_:.4g}" in out
    assert "flat clusters     2 (at most 2, lowest cut of the heights)" in out


@pytest.mark.parametrize(
    ("extra", "params"),
    [
        (["--inference", "greedy-em", "--n-iter", "5"], {"inference": "greedy-em", "n_iter": 5}),
        (
            ["--inference", "mcmc", "--n-iter", "20", "--seed", "2", "--ddt"],
            {"inference": "mcmc", "n_iter": 20, "random_state": 2, "alpha": 0.0, "beta": 0.0},
        ),
    ],
)
def test_the_diffusion_tree_from_the_command_line(tmp_path, capsys, blobs, extra, params):
    import rosetree as rt

    X, names, data = blobs
    nwk, js, lab = tmp_path / "t.nwk", tmp_path / "t.json", tmp_path / "l.csv"
    outputs = ["--newick", str(nwk), "--json", str(js), "--labels-out", str(lab)]
    argv = ["fit", data, "--labels", "name", "--family", "pydt", "--quiet", *extra, *outputs]
    assert main([*argv, "--n-clusters", "2"]) == 0
    out = capsys.readouterr().out
    est = rt.PitmanYorDiffusionTree(**params).fit(X)
    assert f"ln p(X, T, t) = {est.log_joint_:.4f}" in out
    assert f"alpha = {est.alpha_:.4g}, beta = {est.beta_:.4g}, c = {est.c_:.4g}" in out
    assert ("acceptance rate" in out) == ("greedy-em" not in extra)
    back = timed(nwk.read_text().strip(), names, lambda distance: 1 - distance)
    log_joint = rt.pydt_log_prior(back, est.alpha_, est.beta_, est.c_) + rt.pydt_log_likelihood(
        (X - est.center_) / est.scale_, back, est.sigma2_
    )
    assert log_joint == pytest.approx(est.log_joint_, rel=1e-9)
    doc = json.loads(js.read_text())
    assert doc["family"] == "pydt" and doc["log_joint"] == est.log_joint_
    assert doc["sigma2"] == est.sigma2_
    want = est.tree_.max_clusters(2)
    assert [int(r.split(",")[1]) for r in lab.read_text().splitlines()[1:]] == want.tolist()


def test_the_probit_diffusion_tree_takes_missing_cells(tmp_path, capsys):
    X = np.array([[1, 1, 0], [1, np.nan, 0], [0, 0, 1], [0, 1, 1], [1, 0, np.nan]])
    data = write_csv(tmp_path / "d.csv", X)
    argv = ["fit", data, "--family", "pydt", "--likelihood", "probit", "--n-iter", "3"]
    assert main([*argv, "--quiet"]) == 0
    assert "by expectation propagation" in capsys.readouterr().out


def test_the_diffusion_tree_reports_progress_unless_quiet(tmp_path, capfd, blobs):
    _, _, data = blobs
    argv = ["fit", data, "--labels", "name", "--family", "pydt", "--n-iter", "2"]
    assert main([*argv, "--inference", "greedy-em"]) == 0
    assert "pydt greedy EM: pass" in capfd.readouterr().err
    assert main([*argv, "--quiet"]) == 0
    assert capfd.readouterr().err == ""


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--family", "coalescent", "--gamma", "0.3"], "--gamma is an option of --family brt"),
        (["--family", "pydt", "--model", "gaussian"], "--model is an option of --family brt"),
        (["--family", "pydt", "--n-jobs", "2"], "--n-jobs is an option of --family brt or"),
        (["--ddt"], "--ddt is an option of --family pydt, not of --family brt"),
        (["--inference", "mcmc"], "--inference is an option of --family coalescent or pydt"),
        (["--family", "pydt", "--particles", "5"], "--particles is an option of --family coal"),
        (["--family", "coalescent", "--n-iter", "5"], "--n-iter is an option of --family pydt"),
        (["--family", "coalescent", "--likelihood", "probit"], "not one of --family coalescent"),
        (["--family", "pydt", "--inference", "smc-postpost"], "not one of --family pydt's"),
        (["--family", "coalescent", "--particles", "5"], "--particles applies to SMC inference"),
        (["--family", "coalescent", "--seed", "1"], "--seed applies to SMC inference"),
        (
            ["--family", "coalescent", "--llr-threshold", "1", "--n-clusters", "2"],
            "two rules for the flat clusters",
        ),
        (["--restarts", "2"], "--restarts applies to --learn"),
        (["--learn", "--seed", "2"], "--seed applies to --learn --restarts K"),
        (["--family", "pydt", "--n-clusters", "0"], "--n-clusters must be at least 1"),
        (["--family", "pydt", "--n-iter", "0", "--quiet"], "--n-iter: n_iter must be"),
    ],
)
def test_options_of_another_family_are_refused(tmp_path, capsys, monkeypatch, extra, message):
    monkeypatch.chdir(tmp_path)
    data = tmp_path / "d.csv"
    data.write_text("a,b\n0.5,1.0\n-0.5,0.2\n0.1,-1.0\n")
    assert main(["fit", str(data), *extra]) == 2
    captured = capsys.readouterr()
    assert message in captured.err and captured.out == ""
    assert not (tmp_path / "x.csv").exists()


def test_a_missing_cell_is_refused_by_the_gaussian_diffusion_tree(tmp_path, capsys):
    data = tmp_path / "d.csv"
    data.write_text("a,b\n0.5,1.0\n-0.5,\n0.1,-1.0\n")
    assert main(["fit", str(data), "--family", "pydt", "--quiet"]) == 2
    assert "NaN in row 1, column 1" in capsys.readouterr().err


def test_the_options_reach_the_estimators():
    from rosetree.cli import _estimator, build_parser

    def estimator(*argv):
        return _estimator(build_parser().parse_args(["fit", "d.csv", *argv]))

    assert estimator("--family", "pydt").get_params()["verbose"] is True
    assert estimator("--family", "pydt", "--quiet").get_params()["verbose"] is False
    assert (
        estimator("--family", "pydt", "--no-learn").get_params()["learn_hyperparameters"] is False
    )
    for family in ("brt", "coalescent"):
        assert estimator("--family", family).get_params()["verbose"] is True
        assert estimator("--family", family, "--quiet").get_params()["verbose"] is False
    coalescent = estimator("--family", "coalescent", "--lambda", "2", "--learn").get_params()
    assert coalescent["Lambda"] == 2.0 and coalescent["learn_hyperparameters"] is True
    # Options not given keep the estimators' own defaults.
    import rosetree as rt

    assert estimator().get_params()["mixing"] == rt.BayesianRoseTree().mixing
    assert (
        estimator("--family", "pydt").get_params()["n_iter"] == rt.PitmanYorDiffusionTree().n_iter
    )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--max-children", "0"], "--max-children must be at least 1"),
        (["--dp-alpha", "2"], "--dp-alpha applies to --mixing dp"),
        (["--mixing", "dp", "--gamma", "0.3"], "--gamma applies to --mixing brt or gamma"),
        (["--flat", "map", "--cut-threshold", "0.4"], "--cut-threshold applies to --flat dp"),
    ],
)
def test_options_left_unused_or_out_of_range_are_refused_before_fitting(
    options, message, capsys, monkeypatch
):
    import rosetree.cli as cli

    def no_fit(*args, **kwargs):
        raise AssertionError("fitted before checking the options")

    monkeypatch.setattr(cli.BayesianRoseTree, "fit", no_fit)
    assert main(["demo", *options]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rosetree: error: ") and message in err


def test_repeated_names_with_newick_are_refused_before_fitting(tmp_path, capsys):
    data = tmp_path / "x.csv"
    data.write_text("name,a,b\nx,0,1\ny,1,0\nx,1,1\n")
    nwk = tmp_path / "t.nwk"
    assert main(["fit", str(data), "--labels", "name", "--newick", str(nwk)]) == 2
    captured = capsys.readouterr()
    assert "rosetree: error: --labels name: the name 'x' is repeated" in captured.err
    assert captured.out == "" and not nwk.exists()


def test_labels_out_dash_writes_the_csv_alone_to_standard_output(capsys):
    assert main(["demo", "--n-clusters", "3", "--labels-out", "-"]) == 0
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert lines[0] == "name,cluster" and len(lines) == 34
    assert {line.rsplit(",", 1)[1] for line in lines[1:]} == {"0", "1", "2"}
    assert "Elephant" in captured.err  # the printed tree


def test_n_clusters_groups_the_children_of_a_multiway_node():
    import rosetree as rt
    import rosetree.cli as cli

    tree = rt.Tree(4, [[0, 1, 2, 3]], [0.0] * 4 + [1.0])
    labels, rule = cli._n_clusters(tree, 2)
    np.testing.assert_array_equal(labels, [0, 1, 1, 1])
    assert "gives 1" in rule and "grouped" in rule
    labels, rule = cli._n_clusters(tree, 4)
    np.testing.assert_array_equal(labels, [0, 1, 2, 3])
    assert rule == "at most 4, lowest cut of the heights"


def test_data_errors_give_the_line_and_column_of_the_file(tmp_path, capsys):
    data = tmp_path / "d.csv"
    data.write_text("a,b,c\n0,1,1\n1,0.5,0\n0,1,1\n")
    assert main(["fit", str(data), "--model", "bernoulli"]) == 2
    err = capsys.readouterr().err
    assert "(line 3 of the file, column 'b')" in err
    assert "use --model auto, normal-gamma, gaussian or spherical" in err
    data.write_text("0,1,1\n1,0.5,0\n0,1,1\n")
    assert main(["fit", str(data), "--model", "bernoulli", "--no-header"]) == 2
    assert "(line 2 of the file, column '1')" in capsys.readouterr().err


def test_standardize_scales_the_columns_before_fitting(tmp_path, capsys):
    import rosetree as rt

    rng = np.random.default_rng(3)
    X = np.vstack([rng.normal(0, 1, (6, 2)), rng.normal(5, 1, (6, 2))]) * [1.0, 1e4]
    data = write_csv(tmp_path / "d.csv", X)
    argv = ["fit", data, "--family", "coalescent", "--quiet", "--standardize"]
    assert main(argv) == 0
    Z = (X - X.mean(axis=0)) / X.std(axis=0)
    est = rt.KingmanCoalescent().fit(Z)
    assert f"ln p(x, pi) = {est.log_joint_:.4f}" in capsys.readouterr().out


def test_the_diffusion_tree_writes_its_own_flat_clusters(tmp_path, capsys, blobs):
    import rosetree as rt

    X, _, data = blobs
    lab = tmp_path / "l.csv"
    argv = ["fit", data, "--labels", "name", "--family", "pydt", "--quiet", "--seed", "1"]
    assert main([*argv, "--labels-out", str(lab)]) == 0
    est = rt.PitmanYorDiffusionTree(random_state=1).fit(X)
    assert "(r >= 0.5 cut under the DP prior)" in capsys.readouterr().out
    written = [int(r.split(",")[1]) for r in lab.read_text().splitlines()[1:]]
    assert written == est.labels_.tolist()


def test_every_choice_of_every_option_is_offered_once():
    from rosetree.cli import build_parser

    def choices(parser):
        for action in parser._actions:
            if action.choices is not None and not isinstance(action.choices, dict):
                yield action.option_strings, list(action.choices)
            if isinstance(action.choices, dict):  # subcommands
                for sub in action.choices.values():
                    yield from choices(sub)

    seen = list(choices(build_parser()))
    assert any("--likelihood" in flags for flags, _ in seen)
    for flags, options in seen:
        assert len(options) == len(set(options)), (flags, options)
