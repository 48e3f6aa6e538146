"""verify's console output keeps each failure's case id and repro on one line whatever the width
of the terminal or log it goes to, so that a line copied from a CI log re-runs the case."""

import io

from reports import console, verify_report

CASE = "rmsnorm:M=17,N=257,dtype=float32,layout=contiguous,values=tiny,eps=1e-12,seed=1002"
REPRO = (f"python -m harness verify --op rmsnorm --select my_rmsnorm_bug --case {CASE} --backend interpreter "
         "--plugin examples/plugins/quickstart_rmsnorm.py")


def test_case_id_and_repro_are_never_wrapped():
    record = {"op": "rmsnorm", "kernel": "my_rmsnorm_bug", "check": "forward", "case_id": CASE, "shape": [[17, 257]],
              "dtype": "float32", "layout": "contiguous", "passed": False, "repro": REPRO, "err_ratio": 3.3e4,
              "max_abs_err": 0.01, "message": "Mismatched elements: 4332 / 4369 (99.2%)"}
    summary = verify_report.kernel_summary("rmsnorm", "my_rmsnorm_bug", [record], value_checks=["forward"])
    header = {"backend": "interpreter", "device": "cpu", "seed": 0, "versions": {}, "command": "verify"}
    out = io.StringIO()  # not a terminal: rich would wrap at 80 columns
    console.print_verify(verify_report.build(header, [summary], [record]), path="verify.json", file=out)
    lines = out.getvalue().splitlines()
    assert f"    repro: {REPRO}" in lines
    assert any(line.startswith("FAIL my_rmsnorm_bug forward") and line.endswith(CASE) for line in lines)


def test_op_and_kernel_names_are_printed_whole_in_a_log(tmp_path, monkeypatch):
    # bug class: a CI log whose table reads "fused_linear_…": a name nobody can search for or --select
    monkeypatch.setenv("COLUMNS", "80")  # a CI runner's narrow pseudo-width
    op, kernel = "fused_linear_cross_entropy", "triton_fused_linear_cross_entropy_hybrid_chunked_with_a_long_suffix_v2"
    records = [{"op": op, "kernel": kernel, "check": check, "case_id": CASE.replace("rmsnorm", op), "shape": [[17, 257]],
                "dtype": "float32", "layout": "contiguous", "passed": False, "repro": REPRO, "err_ratio": 3.3e4,
                "max_abs_err": 0.01, "message": "m"} for check in ("loss", "dx", "dweight", "dbias")]
    summary = verify_report.kernel_summary(op, kernel, records, value_checks=["loss", "dx", "dweight", "dbias"])
    header = {"backend": "interpreter", "device": "cpu", "seed": 0, "versions": {}, "command": "verify"}
    with open(tmp_path / "log.txt", "w") as log:  # a file, as CI's captured stdout
        console.print_verify(verify_report.build(header, [summary], records), path="verify.json", file=log)
    (row,) = [line for line in (tmp_path / "log.txt").read_text().splitlines() if line.startswith("│ ")]  # one line
    assert row.startswith(f"│ {op} │ {kernel} │ FAIL") and "…" not in row
