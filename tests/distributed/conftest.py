"""A failing two-host test's report is kept where a person can read it after a loop
($TMPDIR/trainbridge-faults/, as the fault matrix's rows: tests/faults/matrix.py keep_report):
a test module that lists its reports in REPORTS gets the last one written, its path in the
test's output."""

import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    reports = getattr(item.module, "REPORTS", None)
    if rep.when != "call" or reports is None:
        return
    if rep.failed and reports:
        from tests.faults.matrix import keep_report

        path = keep_report(f"twohost-{item.name}", reports[-1], [str(rep.longrepr)[-4000:]])
        rep.sections.append(("kept report", path))
    reports.clear()
