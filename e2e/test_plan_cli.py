# SPDX-License-Identifier: Apache-2.0
"""End-to-end tests of `gpuscaler plan`: the bundled demo with no arguments,
JSON and SVG outputs, determinism, a synthetic trace, the backtest, a plan
file of several Deployments with their total, the Prometheus source against
a fake query_range server, and bad input exiting 2 with the flag, key or
file:line named.

Needs GPUSCALER_BIN (set by meson). Traces and files are written to a
temporary folder; nothing outside it is read except the binary."""
import json
import math
import os
import subprocess
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from fakeprom import FakePrometheus  # noqa: E402

BIN = os.environ.get('GPUSCALER_BIN', 'gpuscaler')
TIMEOUT = 240
SERVING = ['--capacity-per-gpu', '5', '--gpus-per-replica', '2', '--service-time', '2s',
           '--p99-latency-target', '6s', '--max-replicas', '200']


def run(*args, cwd=None):
    return subprocess.run([BIN, 'plan', *args], capture_output=True, text=True,
                          timeout=TIMEOUT, cwd=cwd)


def rate_at(t):
    """A daily cycle between 60 and 240 req/s with a slight hourly ripple."""
    day = (t % 86400) / 86400.0
    return 150 - 90 * math.cos(2 * math.pi * (day - 0.1)) + 10 * math.sin(t / 900.0)


def write_trace(path, days, dt=60, t0=0):
    with open(path, 'w') as f:
        f.write('t_seconds,requests\n')
        for i in range(int(days * 86400 / dt)):
            t = t0 + i * dt
            f.write('%d,%d\n' % (t, round(rate_at(t) * dt)))


def scenario_rows(stdout):
    rows = {}
    for line in stdout.splitlines():
        f = line.split()
        if f and f[0].startswith('x') and len(f) == 7:
            rows[f[0]] = f[1:]
    return rows


class DemoTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.svg = os.path.join(cls.tmp.name, 'p.svg')
        cls.json = os.path.join(cls.tmp.name, 'p.json')
        cls.first = run('--report', cls.svg, '--json', cls.json)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_demo_without_arguments(self):
        r = run()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn('bundled demo', r.stdout)
        self.assertIn('horizon   7d', r.stdout)
        rows = scenario_rows(r.stdout)
        self.assertEqual(sorted(rows), ['x1', 'x1.5', 'x2'])
        # GPU-hours grow with the growth scenario
        hours = [float(rows[k][1]) for k in ('x1', 'x1.5', 'x2')]
        self.assertLess(hours[0], hours[1])
        self.assertLess(hours[1], hours[2])
        for name in ('cost-optimal', '70% of baseline', 'none (all flexible)'):
            self.assertIn(name, r.stdout)
        self.assertRegex(r.stdout, r'Reserve \d+ GPUs for the 7d: expected cost')
        self.assertIn('Capacity to secure for the peak with a 20% margin', r.stdout)

    def test_json(self):
        self.assertEqual(self.first.returncode, 0, self.first.stderr)
        with open(self.json) as f:
            doc = json.load(f)
        self.assertIsNone(doc['total'])
        plan = doc['plans'][0]
        self.assertEqual(plan['policy'], 'predictive')
        self.assertEqual([s['growth'] for s in plan['scenarios']], [1, 1.5, 2])
        steps = plan['horizon']['steps']
        self.assertEqual(steps, 7 * 24)
        for s in plan['scenarios']:
            self.assertEqual(len(s['gpus']), steps)
            self.assertAlmostEqual(sum(s['gpus']), s['gpu_hours'], delta=1 + 1e-3 * s['gpu_hours'])
            self.assertGreaterEqual(s['margin_gpus'], s['peak_gpus'] * 1.2 - 1e-9)
        names = [c['name'] for c in plan['commitments']]
        self.assertEqual(names, ['cost-optimal', '70% of baseline', 'none (all flexible)'])
        best = min(c['expected_cost'] for c in plan['commitments'])
        self.assertAlmostEqual(plan['commitments'][0]['expected_cost'], best, places=6)
        self.assertEqual(plan['recommended_reserved_gpus'],
                         plan['commitments'][0]['reserved_gpus'])
        self.assertEqual(len(plan['forecast']['mid']), steps)
        for lo, mid, hi in zip(plan['forecast']['lo'], plan['forecast']['mid'],
                               plan['forecast']['hi']):
            self.assertLessEqual(lo, mid + 1e-9)
            self.assertLessEqual(mid, hi + 1e-9)

    def test_gpu_limit_caps_the_gpus_held(self):
        """Under a gpu-limit the replicas beyond it stay Pending and hold no GPU, as
        simulate counts them: no curve, peak or baseline above the budget (they counted
        every replica asked for: 68 GPUs at peak on a 40-GPU budget)."""
        r = run('--gpu-limit', '40', '--growth', '1', '--json', '-')
        self.assertEqual(r.returncode, 0, r.stderr)
        plan = json.loads(r.stdout)['plans'][0]
        s = plan['scenarios'][0]
        self.assertLessEqual(s['peak_gpus'], 40)
        self.assertLessEqual(s['baseline_gpus'], 40)
        self.assertLessEqual(max(s['gpus_max']), 40 + 1e-9)
        self.assertLessEqual(s['gpu_hours'], 40 * 168 + 1e-6)

    def test_svg(self):
        self.assertEqual(self.first.returncode, 0, self.first.stderr)
        root = ET.parse(self.svg).getroot()
        self.assertTrue(root.tag.endswith('svg'))
        with open(self.svg) as f:
            text = f.read()
        for label in ('forecast 10-90%', 'reserved in use', 'above the commitment',
                      'demand (req/s)', 'GPUs held'):
            self.assertIn(label, text)

    def test_deterministic(self):
        a = run('--json', '-')
        b = run('--json', '-')
        self.assertEqual(a.returncode, 0, a.stderr)
        self.assertEqual(a.stdout, b.stdout)
        json.loads(a.stdout)  # JSON only on stdout

    def test_backtest(self):
        r = run('--backtest', '--horizon', '3d', '--json', os.path.join(self.tmp.name, 'b.json'))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn('backtest: planned from the history before day 4 00:00', r.stdout)
        with open(os.path.join(self.tmp.name, 'b.json')) as f:
            bt = json.load(f)['backtests'][0]
        self.assertEqual(bt['test_s'], 3 * 86400)
        self.assertEqual(bt['test_begin_s'], 4 * 86400)
        self.assertGreater(bt['actual_gpu_hours'], 0)
        err = bt['planned_gpu_hours'] / bt['actual_gpu_hours'] - 1
        self.assertAlmostEqual(bt['gpu_hours_error'], err, places=9)
        self.assertLess(abs(err), 0.25)
        self.assertGreaterEqual(bt['cost_actual'], bt['cost_hindsight'] - 1e-6)


class TraceTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.trace = os.path.join(cls.tmp.name, 'svc.csv')
        write_trace(cls.trace, 6)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_plan_of_a_trace_with_prices(self):
        r = run('--trace', self.trace, *SERVING, '--horizon', '3d', '--growth', '1.0:0.7,1.2:0.3',
                '--price-on-demand', '4', '--price-reserved', '2.4', '--price-spot', '60%',
                '--spot-interruption', '20%', '--policy', 'reactive', '--json', '-')
        self.assertEqual(r.returncode, 0, r.stderr)
        plan = json.loads(r.stdout)['plans'][0]
        self.assertEqual(plan['policy'], 'reactive')
        p = plan['prices']
        self.assertEqual(p['reserved'], 2.4)
        self.assertAlmostEqual(p['spot'], 1.6)
        self.assertAlmostEqual(p['flexible'], 0.8 * 1.6 + 0.2 * 4)
        self.assertEqual([s['weight'] for s in plan['scenarios']], [0.7, 0.3])
        # the cost of a commitment, recomputed from the curves
        c = plan['commitments'][0]
        for s, cs in zip(plan['scenarios'], c['scenarios']):
            flex = sum(max(0, g - c['reserved_gpus']) for g in s['gpus'])
            cost = c['reserved_gpus'] * len(s['gpus']) * 2.4 + flex * p['flexible']
            self.assertAlmostEqual(cs['cost'], cost, delta=1e-6 * cost + 0.01)

    def test_config_file_of_deployments(self):
        other = os.path.join(self.tmp.name, 'other.csv')
        write_trace(other, 5, dt=300, t0=3 * 3600)
        cfg = os.path.join(self.tmp.name, 'plan.yaml')
        with open(cfg, 'w') as f:
            f.write('horizon: 2d\n'
                    'growth: [1.0, 1.5]\n'
                    'capacity-per-gpu: 5\n'
                    'p99-latency-target: 6s\n'
                    'service-time: 2s\n'
                    'max-replicas: 300\n'
                    'deployments:\n'
                    '  - name: chat\n'
                    '    trace: svc.csv\n'      # relative to the file's folder
                    '    gpus-per-replica: 2\n'
                    '  - name: embed\n'
                    '    trace: other.csv\n'
                    '    policy: hpa\n')
        r = run('--config', cfg, '--json', os.path.join(self.tmp.name, 'm.json'))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn('gpuscaler plan: chat:', r.stdout)
        self.assertIn('gpuscaler plan: embed:', r.stdout)
        self.assertIn('total of 2 Deployments', r.stdout)
        with open(os.path.join(self.tmp.name, 'm.json')) as f:
            doc = json.load(f)
        self.assertEqual([p['name'] for p in doc['plans']], ['chat', 'embed'])
        self.assertEqual([p['policy'] for p in doc['plans']], ['predictive', 'hpa'])
        total = doc['total']
        self.assertEqual(total['deployments'], 2)
        # the histories end 21 h apart (6 days of svc.csv, 5 from 3 h of other.csv): the
        # total adds the steps of the same clock time over the 27 h both horizons cover
        # (it added step i to step i, a service's 15:00 to the other's 12:00)
        h = total['horizon']
        self.assertEqual((h['begin_s'], h['step_s'], h['steps']), (6 * 86400, 3600, 27))
        self.assertIn('the histories end at different times', r.stdout)
        for s in range(2):
            want = [0.0] * h['steps']
            for p in doc['plans']:
                off = round((h['begin_s'] - p['horizon']['begin_s']) / 3600)
                for i in range(h['steps']):
                    want[i] += p['scenarios'][s]['gpus'][off + i]
            for got, w in zip(total['scenarios'][s]['gpus'], want):
                self.assertAlmostEqual(got, w, delta=1e-3)
            self.assertAlmostEqual(total['scenarios'][s]['gpu_hours'], sum(want),
                                   delta=1e-3 * sum(want))

    def test_config_file_of_deployments_that_share_no_hour(self):
        late = os.path.join(self.tmp.name, 'late.csv')
        write_trace(late, 5, dt=300, t0=4 * 86400)
        cfg = os.path.join(self.tmp.name, 'apart.yaml')
        with open(cfg, 'w') as f:
            f.write('horizon: 2d\ncapacity-per-gpu: 5\np99-latency-target: 6s\n'
                    'service-time: 2s\nmax-replicas: 300\ndeployments:\n'
                    '  - name: chat\n    trace: svc.csv\n'
                    '  - name: late\n    trace: late.csv\n')
        r = run('--config', cfg)
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn("total: the plans share no hour: chat's horizon ends before late's begins",
                      r.stderr)

    def test_a_stdout_that_cannot_be_written_fails(self):
        """stdout's write errors end the run with exit 1 (they were not seen: exit 0), and
        the output files of that run are left as they were."""
        keep = os.path.join(self.tmp.name, 'keep.json')
        with open(keep, 'w') as f:
            f.write('old contents')
        for extra in (['--json', keep], ['--json', '-']):
            with open('/dev/full', 'w') as full:
                r = subprocess.run([BIN, 'plan', '--trace', self.trace, *SERVING,
                                    '--horizon', '2d', *extra], stdout=full,
                                   stderr=subprocess.PIPE, text=True, timeout=TIMEOUT)
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertIn('stdout: write failed: No space left on device', r.stderr)
            with open(keep) as f:
                self.assertEqual(f.read(), 'old contents')

    def test_too_little_history(self):
        short = os.path.join(self.tmp.name, 'short.csv')
        write_trace(short, 2.5)
        r = run('--trace', short, *SERVING, '--horizon', '1d')
        self.assertEqual(r.returncode, 2)
        self.assertIn('daily seasonality needs 3 whole days', r.stderr)
        self.assertIn('the history has 2 (2.5 days)', r.stderr)

    def test_horizon_beyond_history(self):
        r = run('--trace', self.trace, *SERVING)
        self.assertEqual(r.returncode, 2)
        self.assertIn('--horizon (default): 30d (30.0 days) is longer than the history, 6d',
                      r.stderr)
        r = run('--trace', self.trace, *SERVING, '--horizon', '7d')
        self.assertEqual(r.returncode, 2)
        self.assertIn('--horizon: 7d (7.0 days) is longer than the history', r.stderr)

    def test_backtest_needs_twice_the_horizon(self):
        r = run('--trace', self.trace, *SERVING, '--horizon', '4d', '--backtest')
        self.assertEqual(r.returncode, 2)
        self.assertIn('--backtest: holding out the last 4d (4.0 days)', r.stderr)
        self.assertIn('needs at least 8d (8.0 days)', r.stderr)


class BadInputTest(unittest.TestCase):
    """Each bad input exits 2 and names what is wrong, before any work."""

    def check(self, args, needle, code=2):
        r = run(*args)
        self.assertEqual(r.returncode, code, r.stderr)
        self.assertIn(needle, r.stderr)
        self.assertEqual(r.stdout, '')

    def test_prices(self):
        self.check(['--price-reserved', '150%'], '--price-reserved: a discount of 150% is out of')
        self.check(['--price-reserved', '1.5'], 'price-reserved: 1.5 per GPU-hour is not below')
        self.check(['--price-on-demand', '0'], '--price-on-demand: 0 is out of range')
        self.check(['--price-on-demand', '30%'], 'not a discount')
        self.check(['--price-spot', 'cheap'], "--price-spot: 'cheap' is not a price")
        self.check(['--spot-interruption', '2'], '--spot-interruption: 2 is out of range')

    def test_growth_lists(self):
        self.check(['--growth', '1,,2'], "--growth: '1,,2' is not a list of growth factors")
        self.check(['--growth', '1,fast'], "--growth: 'fast' is not a number")
        self.check(['--growth', '1:0.5,2'], 'give a weight to every scenario or to none')
        self.check(['--growth', '0'], '--growth: 0 is out of range')

    def test_flags(self):
        self.check(['--nonsense', '1'], 'unknown flag --nonsense')
        self.check(['--start', '2d'], '--start: not a plan key')
        self.check(['--horizon', 'soon'], "--horizon: 'soon' is not a duration")
        self.check(['--step', '7m'], '--step: 7m does not divide 1h')
        self.check(['--horizon'], '--horizon needs a value')
        self.check(['--backtest=maybe'], "--backtest: 'maybe' is not true or false")
        self.check(['--query', 'up'], '--query needs --prometheus URL')
        self.check(['--trace', '/nonexistent/x.csv', *SERVING], '/nonexistent/x.csv')
        self.check(['--trace', 'x.csv'], 'capacity-per-gpu: required')
        self.check(['--report', '/nonexistent/dir/x.svg'], '--report /nonexistent/dir/x.svg: '
                   'cannot write')

    def test_config_errors_name_the_line(self):
        with tempfile.TemporaryDirectory() as d:
            cfg = os.path.join(d, 'p.yaml')
            with open(cfg, 'w') as f:
                f.write('horizon: 3d\ngrowth: 1,x\n')
            self.check(['--config', cfg], 'p.yaml:2: growth:')
            with open(cfg, 'w') as f:
                f.write('deployments:\n  - name: a\n    trace: a.csv\n    margin: 10%\n')
            self.check(['--config', cfg], 'p.yaml:4: margin: a plan-wide key')
            with open(cfg, 'w') as f:
                f.write('horizon: 40d\n')
            self.check(['--config', cfg], 'p.yaml:1: horizon: 40d (40.0 days) is longer than')


    def test_a_mistyped_time_names_its_line(self):
        """One row with a digit too many after 30 days of hourly rows made the model's
        buffer 125 GB (out of memory, SIGABRT)."""
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, 'typo.csv')
            with open(p, 'w') as f:
                f.write('t_seconds,requests\n')
                for k in range(30 * 24):
                    f.write('%d,36000\n' % (1699999200 + 3600 * k))
                f.write('17025912000,36000\n')
            self.check(['--trace', p, *SERVING], "typo.csv:722: t_seconds '17025912000' is "
                       "177383.2 days after the first row (1699999200 s); at most 400 days are "
                       "read (a mistyped time?)")

    def test_errors_across_keys_name_where_the_key_was_set(self):
        with tempfile.TemporaryDirectory() as d:
            cfg = os.path.join(d, 'p.yaml')
            with open(cfg, 'w') as f:
                f.write('trace: x.csv\nmin-replicas: 50\nmax-replicas: 10\n')
            self.check(['--config', cfg, *SERVING[:8]], '%s:2: min-replicas: 50 is above '
                       'max-replicas 10' % cfg)
            self.check(['--config', cfg, *SERVING[:8], '--min-replicas', '40'],
                       'gpuscaler plan: --min-replicas: 40 is above max-replicas 10')
        self.check(['--config='], 'gpuscaler plan: --config: missing value')
        self.check(['--trace=', *SERVING], 'gpuscaler plan: --trace: missing value')


class PrometheusTest(unittest.TestCase):
    """The Prometheus source: query_range in chunks, the series becomes the
    history. A fake server answers with the daily cycle over the range asked."""

    @classmethod
    def setUpClass(cls):
        def bad_query(path, params):
            if params.get('query') == 'bad(':
                return 400, {'status': 'error', 'errorType': 'bad_data',
                             'error': 'parse error at char 5'}
            if params.get('query') == 'stray' and path == '/api/v1/query_range':
                # the range asked for, and a point before and after it far away
                got = FakePrometheus._answer(path, params, rate_at, None)
                vals = got[1]['data']['result'][0]['values']
                vals.insert(0, [1, '5'])
                vals.append([1e11, '5'])
                return got
            return None
        cls.prom = FakePrometheus(rate_at, reply=bad_query)
        cls.url = cls.prom.url

    @classmethod
    def tearDownClass(cls):
        cls.prom.close()

    def test_plan_from_prometheus(self):
        q = 'sum(rate(vllm:request_success_total{namespace="ml"}[5m]))'
        r = run('--prometheus', self.url, '--query', q, '--since', '6d', '--query-step', '5m',
                '--horizon', '3d', *SERVING, '--json', '-')
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(q, self.prom.queries())
        plan = json.loads(r.stdout)['plans'][0]
        self.assertEqual(plan['source'], q)
        self.assertEqual(plan['history']['bucket_s'], 300)
        self.assertAlmostEqual(plan['history']['end_s'] - plan['history']['begin_s'],
                               6 * 86400 + 300, delta=301)
        # the daily cycle is recovered: the forecast swings like the history
        mid = plan['forecast']['mid']
        self.assertGreater(max(mid) / min(mid), 2.5)

    def test_points_outside_the_range_are_left_out(self):
        """A server's points outside the range asked for (one at t=1, one in the year 5138)
        are left out: the history spanned them, millions of steps (35 s and 13 GB)."""
        r = run('--prometheus', self.url, '--query', 'stray', '--since', '6d',
                '--query-step', '5m', '--horizon', '3d', *SERVING, '--json', '-')
        self.assertEqual(r.returncode, 0, r.stderr)
        plan = json.loads(r.stdout)['plans'][0]
        self.assertAlmostEqual(plan['history']['end_s'] - plan['history']['begin_s'],
                               6 * 86400 + 300, delta=301)

    def test_tenant_header_and_basic_auth(self):
        """prometheus-header and basic auth reach every query; a plan file's relative
        password-file is read beside it; a reserved header is refused before any query."""
        q = 'sum(rate(vllm:request_success_total{namespace="tenant"}[5m]))'
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, 'pw'), 'w') as f:
                f.write('s3cret\n')
            cfg = os.path.join(d, 'p.yaml')
            with open(cfg, 'w') as f:
                f.write('prometheus: %s\nquery: \'%s\'\nsince: 6d\nquery-step: 5m\n'
                        'prometheus-username: planner\nprometheus-password-file: pw\n'
                        'prometheus-header: "X-Scope-OrgID: team-a"\n' % (self.url, q))
            n0 = len(self.prom.requests)
            r = run('--config', cfg, '--prometheus-header', 'X-Scope-OrgID: team-b',
                    '--prometheus-header', 'X-Extra:  two words', '--horizon', '2d', *SERVING)
            self.assertEqual(r.returncode, 0, r.stderr)
            with self.prom.lock:
                seen = [h for (path, params), h in zip(self.prom.requests[n0:],
                                                       self.prom.headers[n0:])
                        if params.get('query') == q]
            self.assertGreater(len(seen), 0)
            for h in seen:  # the flag replaced the file's tenant; base64("planner:s3cret")
                self.assertEqual(h.get('x-scope-orgid'), 'team-b', h)
                self.assertEqual(h.get('x-extra'), 'two words', h)
                self.assertEqual(h.get('authorization'), 'Basic cGxhbm5lcjpzM2NyZXQ=', h)
        n0 = len(self.prom.requests)
        r = run('--prometheus', self.url, '--query', q, '--prometheus-header',
                'Authorization: Bearer x', '--horizon', '2d', *SERVING)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn('prometheus-header: header Authorization is set by gpuscaler itself',
                      r.stderr)
        r = run('--prometheus', self.url, '--query', q, '--prometheus-username', 'u',
                '--horizon', '2d', *SERVING)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn('prometheus-username: set without password-file', r.stderr)
        self.assertEqual(len(self.prom.requests), n0)

    def test_bad_query_is_an_input_error(self):
        r = run('--prometheus', self.url, '--query', 'bad(', '--since', '6d', '--horizon', '2d',
                *SERVING)
        self.assertEqual(r.returncode, 2)
        self.assertIn('--query on %s: HTTP 400' % self.url, r.stderr)

    def test_unreachable_is_a_runtime_error(self):
        r = run('--prometheus', 'http://127.0.0.1:1', '--query', 'up', '--since', '6d',
                '--horizon', '2d', *SERVING)
        self.assertEqual(r.returncode, 1)
        self.assertIn('prometheus unreachable', r.stderr)


if __name__ == '__main__':
    unittest.main(verbosity=2)
