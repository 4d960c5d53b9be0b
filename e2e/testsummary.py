# SPDX-License-Identifier: Apache-2.0
"""Run a test module's unittest cases and print the closing line the test
command counts: "N passed, N failed, N skipped" (skip reasons listed first)."""
import sys
import unittest


def run(module_name="__main__"):
    suite = unittest.defaultTestLoader.loadTestsFromModule(sys.modules[module_name])
    res = unittest.TextTestRunner(verbosity=2).run(suite)
    failed = len({getattr(t, "test_case", t).id() for t, _ in res.failures + res.errors})
    skipped = len(res.skipped)
    for t, why in res.skipped:
        print("skipped %s: %s" % (t.id().replace("__main__.", ""), why))
    ran_skipped = len([t for t, _ in res.skipped if isinstance(t, unittest.TestCase)])
    failed_ran = len({getattr(t, "test_case", t).id() for t, _ in res.failures + res.errors
                      if isinstance(getattr(t, "test_case", t), unittest.TestCase)})
    passed = res.testsRun - failed_ran - ran_skipped
    print("%d passed, %d failed, %d skipped" % (passed, failed, skipped))
    return 0 if res.wasSuccessful() else 1


def counts(r):
    """(passed, failed, skipped, expected failures) of a unittest result, for a test file's
    closing line. A class or module fixture's error (setUpClass failed: none of its tests
    ran) is a failure, not one test less passed (which read "-1 passed")."""
    def case(t):  # a subtest's test
        return getattr(t, "test_case", t)

    def ran(t):
        return isinstance(case(t), unittest.TestCase)
    bad = [t for t, _ in r.failures + r.errors] + list(r.unexpectedSuccesses)
    failed_ran = len({case(t).id() for t in bad if ran(t)})
    fixtures = len([t for t in bad if not ran(t)])
    skipped_ran = len([t for t, _ in r.skipped if ran(t)])
    passed = r.testsRun - failed_ran - skipped_ran - len(r.expectedFailures)
    return passed, failed_ran + fixtures, len(r.skipped), len(r.expectedFailures)
