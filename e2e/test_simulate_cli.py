# SPDX-License-Identifier: Apache-2.0
"""End-to-end tests of `gpuscaler simulate`: the bundled demo, the report
files (CSV columns, SVG as XML, JSON), bad input exiting 2 with the line or
flag named, config-file precedence and determinism.

Needs GPUSCALER_BIN (set by meson). Traces are written to a temporary folder;
nothing outside it is read except the binary."""
import csv
import io
import json
import math
import os
import shutil
import subprocess
import tempfile
import unittest
import xml.etree.ElementTree as ET

BIN = os.environ.get('GPUSCALER_BIN', 'gpuscaler')
POLICIES = ['predictive', 'reactive', 'hpa', 'oracle', 'static-peak']
TIMEOUT = 240


def run(*args, cwd=None):
    return subprocess.run([BIN, 'simulate', *args], capture_output=True, text=True,
                          timeout=TIMEOUT, cwd=cwd)


def slurp(path, mode='rb'):
    with open(path, mode) as f:
        return f.read()


def table_rows(stdout):
    """Rows of the result table: name -> fields after the name."""
    rows = {}
    lines = stdout.splitlines()
    head = [i for i, l in enumerate(lines) if l.startswith('policy ')]
    assert head, 'no table header in output:\n' + stdout
    for line in lines[head[0] + 1:]:
        f = line.split()
        if f and f[0] in POLICIES:
            rows[f[0]] = f[1:]
    return rows


def small_trace(path, seconds=7200):
    """A deterministic 1 s trace: slow wave plus a plateau every 30 min."""
    with open(path, 'w') as f:
        f.write('t_seconds,requests\n')
        for t in range(seconds):
            rate = 100 + 80 * math.sin(t / 1200.0) + (60 if t % 1800 < 300 else 0)
            f.write('%d,%d\n' % (t, int(rate)))


SMALL = ['--capacity-per-gpu', '10', '--gpus-per-replica', '1', '--max-replicas', '60',
         '--p99-latency-target', '5s', '--service-time', '1s']


class DemoTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        d = cls.tmp.name
        cls.files = [os.path.join(d, n) for n in ('tl.csv', 'r.svg', 'r.json')]
        cls.first = run('--timeline', cls.files[0], '--report', cls.files[1],
                        '--json', cls.files[2])
        cls.blobs = [slurp(p) for p in cls.files] if cls.first.returncode == 0 else []

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_demo_prints_every_policy_against_the_oracle(self):
        r = self.first
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn('bundled demo', r.stdout)
        self.assertIn('cold start 3m', r.stdout)
        self.assertIn('p99 <= ', r.stdout)
        rows = table_rows(r.stdout)
        self.assertEqual(sorted(rows), sorted(POLICIES))
        oracle = float(rows['oracle'][0])
        for name, f in rows.items():
            gpu_hours = float(f[0])
            # the GPU-hours vs oracle column: this policy's over the oracle's
            self.assertTrue(f[1].endswith('x'), f)
            self.assertAlmostEqual(float(f[1][:-1]), gpu_hours / oracle, delta=0.002)
            self.assertGreaterEqual(gpu_hours, oracle * 0.999, name)
            miss, total = (int(x) for x in f[2].split('/'))
            self.assertGreater(gpu_hours, 0, name)
            self.assertEqual(total, 5 * 24 * 60, name)  # 5 scored days of minutes
            self.assertLessEqual(miss, total)
            self.assertTrue(f[3].endswith('%'))
            peak = int(f[6])
            self.assertTrue(10 <= peak <= 100, (name, peak))
        # perfect foresight never misses the SLA; static-peak never scales
        self.assertEqual(rows['oracle'][2].split('/')[0], '0')
        self.assertEqual(rows['static-peak'][4], '0')
        self.assertIn('vs oracle: GPU-hours /', r.stdout)

    def test_timeline_csv(self):
        self.assertEqual(self.first.returncode, 0, self.first.stderr)
        rows = list(csv.DictReader(io.StringIO(self.blobs[0].decode())))
        self.assertEqual(list(rows[0].keys()),
                         ['t_seconds', 'policy', 'desired_replicas', 'ready_replicas',
                          'demand_rps', 'requests_per_gpu', 'forecast_rps', 'p99_ms'])
        self.assertEqual(len(rows), len(POLICIES) * 5 * 24 * 60)
        by = {p: [r for r in rows if r['policy'] == p] for p in POLICIES}
        for p in POLICIES:
            self.assertEqual(len(by[p]), 5 * 24 * 60)
            ts = [float(r['t_seconds']) for r in by[p]]
            self.assertEqual(ts[0], 2 * 86400)
            self.assertTrue(all(b - a == 60 for a, b in zip(ts, ts[1:])))
            for r in by[p][::97]:
                self.assertGreaterEqual(int(r['desired_replicas']), 2)
                self.assertLessEqual(int(r['ready_replicas']), 100)
                self.assertGreater(float(r['p99_ms']), 0)
                float(r['demand_rps'])
                float(r['requests_per_gpu'])
        # Only the predictive policy has a forecast.
        self.assertTrue(all(r['forecast_rps'] != '' for r in by['predictive'][10:]))
        for p in ('reactive', 'hpa', 'oracle', 'static-peak'):
            self.assertTrue(all(r['forecast_rps'] == '' for r in by[p]), p)
        # The same arrivals for every policy.
        for a, b in zip(by['predictive'], by['hpa']):
            self.assertEqual(a['demand_rps'], b['demand_rps'])

    def test_report_svg(self):
        self.assertEqual(self.first.returncode, 0, self.first.stderr)
        root = ET.fromstring(self.blobs[1])
        self.assertTrue(root.tag.endswith('svg'))
        texts = ' '.join(t.text or '' for t in root.iter() if t.tag.endswith('text'))
        for p in POLICIES:
            self.assertIn(p, texts)
        self.assertIn('SLA', texts)
        self.assertIn('day 3', texts)
        lines = [e for e in root.iter() if e.tag.endswith('polyline')]
        self.assertEqual(len(lines), 1 + 3 * len(POLICIES))  # demand; capacity, replicas, p99
        self.assertIn('vs oracle', texts)
        self.assertLess(len(self.blobs[1]), 2_000_000)

    def test_json(self):
        self.assertEqual(self.first.returncode, 0, self.first.stderr)
        doc = json.loads(self.blobs[2])
        self.assertEqual([p['name'] for p in doc['policies']], POLICIES)
        self.assertEqual(doc['parameters']['cold-start'], '3m')
        self.assertEqual(doc['window']['start_seconds'], 2 * 86400)
        rows = table_rows(self.first.stdout)
        self.assertGreater(doc['window']['oracle_gpu_hours'], 0)
        self.assertIs(doc['window']['max_replicas_too_low'], False)
        for p in doc['policies']:
            self.assertAlmostEqual(p['gpu_hours'], float(rows[p['name']][0]), delta=0.06)
            self.assertAlmostEqual(p['gpu_hours_vs_oracle'],
                                   p['gpu_hours'] / doc['window']['oracle_gpu_hours'], delta=1e-3)
            self.assertGreaterEqual(p['flaps'], 0)
            self.assertEqual(p['intervals'], 7200)
            self.assertLessEqual(p['sla_violating_intervals'], p['intervals'])
            self.assertGreater(p['requests'], 0)

    def test_json_on_stdout(self):
        """--json -: only the JSON, on stdout (no table, no file named "-"), as plan's."""
        d = tempfile.mkdtemp(prefix='sim-json-')
        self.addCleanup(shutil.rmtree, d, True)
        r = run('--duration', '1h', '--json', '-', cwd=d)
        self.assertEqual(r.returncode, 0, r.stderr)
        doc = json.loads(r.stdout)
        self.assertEqual([p['name'] for p in doc['policies']], POLICIES)
        self.assertEqual(os.listdir(d), [])

    def test_deterministic(self):
        self.assertEqual(self.first.returncode, 0, self.first.stderr)
        with tempfile.TemporaryDirectory() as d:
            files = [os.path.join(d, n) for n in ('tl.csv', 'r.svg', 'r.json')]
            again = run('--timeline', files[0], '--report', files[1], '--json', files[2])
            self.assertEqual(again.returncode, 0, again.stderr)
            self.assertEqual(again.stdout, self.first.stdout)
            for p, blob in zip(files, self.blobs):
                self.assertEqual(slurp(p), blob, p)


class InputTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, name, text):
        p = os.path.join(self.dir, name)
        with open(p, 'w') as f:
            f.write(text)
        return p

    def bad(self, args, *needles):
        r = run(*args)
        self.assertEqual(r.returncode, 2, (args, r.stdout, r.stderr))
        for n in needles:
            self.assertIn(n, r.stderr, (args, r.stderr))
        self.assertEqual(r.stdout, '')
        return r

    def test_custom_trace_and_flags(self):
        p = os.path.join(self.dir, 't.csv')
        small_trace(p)
        r = run('--trace', p, *SMALL, '--policy', 'reactive,hpa', '--start', '10m')
        self.assertEqual(r.returncode, 0, r.stderr)
        rows = table_rows(r.stdout)
        self.assertEqual(sorted(rows), ['hpa', 'reactive'])
        self.assertEqual(rows['hpa'][2].split('/')[1], str((7200 - 600) // 60))
        # Doubling the traffic needs more GPU-hours.
        r2 = run('--trace', p, *SMALL, '--policy', 'reactive,hpa', '--start', '10m',
                 '--scale', '2')
        self.assertEqual(r2.returncode, 0, r2.stderr)
        self.assertGreater(float(table_rows(r2.stdout)['reactive'][0]),
                           1.5 * float(rows['reactive'][0]))

    def test_quantile_sweep(self):
        """--quantile-sweep replays predictive at each forecast-quantile and prints the
        trade-off: in the table (the configured one starred) and the JSON, each point the run
        --forecast-quantile of that value gives."""
        p = os.path.join(self.dir, 'sweep.csv')
        small_trace(p)
        j = os.path.join(self.dir, 'sweep.json')
        svg = os.path.join(self.dir, 'sweep.svg')
        r = run('--trace', p, *SMALL, '--policy', 'predictive,hpa', '--start', '30m',
                '--warmup', '30m', '--quantile-sweep', '0.95, 0.7', '--json', j, '--report', svg)
        self.assertEqual(r.returncode, 0, r.stderr)
        # the chart's fifth panel: a point per value, the configured one starred
        chart = ET.fromstring(slurp(svg))
        labels = [t.text for t in chart.iter('{http://www.w3.org/2000/svg}text')]
        self.assertIn('forecast-quantile trade-off', ' '.join(x or '' for x in labels))
        for q in ('0.7', '0.9 *', '0.95'):
            self.assertIn(q, labels)
        lines = r.stdout.splitlines()
        head = [i for i, ln in enumerate(lines) if ln.startswith('quantile ')]
        self.assertEqual(len(head), 1, r.stdout)
        sweep = [ln.split() for ln in lines[head[0] + 1:head[0] + 4]]
        self.assertEqual([f[0] for f in sweep], ['0.7', '0.9', '0.95'])
        self.assertEqual(sweep[1][1], '*')
        # the configured point is predictive's own row
        self.assertEqual(sweep[1][2], table_rows(r.stdout)['predictive'][0])
        doc = json.loads(slurp(j))
        pts = doc['quantile_sweep']
        self.assertEqual([x['forecast_quantile'] for x in pts], [0.7, 0.9, 0.95])
        self.assertEqual([x['configured'] for x in pts], [False, True, False])
        self.assertEqual(doc['parameters']['forecast-quantile'], 0.9)
        alone = run('--trace', p, *SMALL, '--policy', 'predictive', '--start', '30m',
                    '--warmup', '30m', '--forecast-quantile', '0.7', '--json', j)
        self.assertEqual(alone.returncode, 0, alone.stderr)
        one = json.loads(slurp(j))
        self.assertNotIn('quantile_sweep', one)
        got = one['policies'][0]
        self.assertEqual(pts[0]['gpu_hours'], got['gpu_hours'])
        self.assertEqual(pts[0]['sla_violating_intervals'], got['sla_violating_intervals'])
        self.assertEqual(pts[0]['plan_coverage'], got['plan_coverage'])
        bad = run('--trace', p, *SMALL, '--quantile-sweep', '0.8,1.5')
        self.assertEqual(bad.returncode, 2)
        self.assertIn('quantile-sweep', bad.stderr)
        self.assertIn('forecast-quantile', bad.stderr)
        self.assertEqual(bad.stdout, '')

    def test_scale_log_is_a_scorable_timeline(self):
        p = os.path.join(self.dir, 't.csv')
        small_trace(p)
        log = os.path.join(self.dir, 'log.csv')
        r = run('--trace', p, *SMALL, '--policy', 'predictive,oracle', '--scale-log', log)
        self.assertEqual(r.returncode, 0, r.stderr)
        rows = list(csv.DictReader(open(log)))
        self.assertEqual(list(rows[0].keys()), ['t_seconds', 'policy', 'desired_replicas'])
        for pol in ('predictive', 'oracle'):
            mine = [(int(x['t_seconds']), int(x['desired_replicas'])) for x in rows
                    if x['policy'] == pol]
            self.assertEqual(mine[0][0], 0)                      # the window's start
            self.assertTrue(all(a[0] < b[0] for a, b in zip(mine, mine[1:])))
            self.assertTrue(all(a[1] != b[1] for a, b in zip(mine, mine[1:])))
        self.assertEqual({x['policy'] for x in rows}, {'predictive', 'oracle'})

    def test_max_replicas_too_low_is_said(self):
        p = os.path.join(self.dir, 't.csv')
        small_trace(p)
        r = run('--trace', p, *SMALL[:4], '--max-replicas', '5', '--p99-latency-target', '5s',
                '--service-time', '1s')
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn('warning: max-replicas 5 cannot carry this trace', r.stdout)

    def test_gpu_limit(self):
        """--gpu-limit: a fixed GPU budget; replicas past it stay Pending and the report says
        how many and for how long (demo: G = 2, 80 GPUs place 40 replicas, the peak needs 51)."""
        j = os.path.join(self.dir, 'g.json')
        r = run('--gpu-limit', '80', '--json', j)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn('gpu-limit 80: at most 40 replicas placed', r.stdout)
        self.assertIn('unschedulable (gpu-limit): replica-hours Pending, most at once:', r.stdout)
        self.assertIn('warning: gpu-limit 80 places 40 replicas, the SLA needs', r.stdout)
        res = json.loads(slurp(j, 'r'))
        self.assertEqual(res['parameters']['gpu-limit'], 80)
        for pol in res['policies']:
            self.assertIn('pending_replica_hours', pol)
            if pol['name'] in ('oracle', 'static-peak'):
                self.assertEqual(pol['peak_unschedulable'], 0)
                self.assertLessEqual(pol['peak_replicas'], 40)
        pred = [p for p in res['policies'] if p['name'] == 'predictive'][0]
        # gpuscaler's policy asks past the budget only a little (1 at once in the measured run)
        self.assertLessEqual(pred['peak_unschedulable'], 4)
        self.assertLessEqual(pred['gpu_hours'], 80 * 120)
        self.bad(['--gpu-limit', '1'], 'gpu-limit: 1 GPUs cannot place one replica of 2 GPUs')
        self.bad(['--gpu-limit', '-4'], 'gpu-limit')

    def test_custom_trace_deterministic(self):
        p = os.path.join(self.dir, 't.csv')
        small_trace(p)
        outs = []
        for i in range(2):
            j = os.path.join(self.dir, 'r%d.json' % i)
            r = run('--trace', p, *SMALL, '--json', j)
            self.assertEqual(r.returncode, 0, r.stderr)
            outs.append((r.stdout, slurp(j, 'r')))
        self.assertEqual(outs[0], outs[1])

    def test_config_file_and_precedence(self):
        p = os.path.join(self.dir, 't.csv')
        small_trace(p, 3600)
        cfg = self.write('sim.yaml', 'trace: t.csv\ncapacity-per-gpu: 10\n'
                         'gpus-per-replica: 1\nmax-replicas: 60\nsla: 5s\n'
                         'policy: [reactive, hpa]\nscale: 1.5\n')
        r = run('--config', cfg, '--scale', '0.5')
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn('counts x0.5', r.stdout)  # the flag wins over the file
        self.assertIn(p, r.stdout)  # trace relative to the file's folder
        self.assertEqual(sorted(table_rows(r.stdout)), ['hpa', 'reactive'])

    def test_missing_trace_file(self):
        self.bad(['--trace', os.path.join(self.dir, 'nope.csv'), *SMALL], 'nope.csv')

    def test_malformed_rows_name_the_line(self):
        p = self.write('bad.csv', 't_seconds,requests\n0,5\n1,5\n2,five\n')
        self.bad(['--trace', p, *SMALL], 'bad.csv:4')
        p = self.write('back.csv', 't_seconds,requests\n0,5\n10,5\n20,5\n15,5\n')
        self.bad(['--trace', p, *SMALL], 'back.csv:5')
        p = self.write('neg.csv', 't_seconds,requests\n0,5\n1,-3\n')
        self.bad(['--trace', p, *SMALL], 'neg.csv:3')
        # a trace's bucket width comes from its rows: one row gives none, rows 1.5 s apart one
        # the simulator cannot replay, lines ended by CR alone are no lines
        p = self.write('one.csv', 't_seconds,requests\n0,100\n')
        self.bad(['--trace', p, *SMALL], 'one.csv: trace has one data row')
        p = self.write('frac.csv', '0,10\n1.5,10\n3,10\n')
        self.bad(['--trace', p, *SMALL], 'frac.csv: buckets of 1.5 s', 'whole seconds')
        p = self.write('cr.csv', 't_seconds,requests\r0,10\r60,10\r')
        self.bad(['--trace', p, *SMALL], 'cr.csv:1: lines end with a carriage return alone')
        # a timestamp typo years ahead is refused before anything is allocated per second
        p = self.write('typo.csv', 't_seconds,requests\n1700000000,600\n1700000060,600\n'
                                   '1800000020,600\n')
        self.bad(['--trace', p, *SMALL], 'the scored span is 1157.4 days; at most 400')

    def test_unix_time_trace_shows_dates(self):
        """A trace recorded by `run --record` carries UNIX time: the table and the chart give
        calendar dates and UTC times, not "day 19675 22:13"."""
        p = os.path.join(self.dir, 'rec.csv')
        t0 = 1700000000  # 2023-11-14T22:13:20Z
        with open(p, 'w') as f:
            f.write('# gpuscaler run --record: t_seconds (UNIX), requests per interval\n'
                    't_seconds,requests\n')
            for k in range(2 * 86400 // 15):
                f.write('%d,%d\n' % (t0 + 15 * k, 1500 + (k % 240) * 5))
        svg = os.path.join(self.dir, 'rec.svg')
        r = run('--trace', p, *SMALL, '--report', svg)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn('scored 2023-11-14 22:13 UTC -> 2023-11-16 22:13 UTC', r.stdout)
        self.assertNotIn('day 1967', r.stdout)
        root = ET.fromstring(slurp(svg))
        labels = [t.text for t in root.iter() if t.tag.endswith('text')]
        self.assertIn('2023-11-15', labels)
        self.assertIn('2023-11-16', labels)
        self.assertFalse([x for x in labels if x and x.startswith('day ')], labels)
        # a relative clock keeps "day N"
        q = os.path.join(self.dir, 'rel.csv')
        small_trace(q, 2 * 86400)
        r = run('--trace', q, *SMALL, '--policy', 'reactive')
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn('scored day 0 00:00 -> day 2 00:00', r.stdout)

    def test_absurd_request_counts_name_the_line(self):
        p = self.write('huge.csv', 't_seconds,requests\n0,5\n1,1e308\n2,5\n')
        r = self.bad(['--trace', p, *SMALL], 'huge.csv:3', "requests '1e308' is over the limit")
        self.assertNotIn('inf', r.stderr)
        p = self.write('edge.csv', 't_seconds,requests\n0,5\n1,1e12\n2,5\n')
        r = run('--trace', p, *SMALL, '--policy', 'reactive')
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn('inf', r.stdout)

    def test_endless_line_is_refused_at_once(self):
        import time
        t0 = time.monotonic()
        r = self.bad(['--trace', '/dev/zero', *SMALL], '/dev/zero:1', 'longer than 65536 bytes')
        self.assertLess(time.monotonic() - t0, 5.0, r.stderr)

    def test_gzip_trace_read_directly(self):
        import gzip
        p = os.path.join(self.dir, 't.csv')
        small_trace(p, 3600)
        gz = p + '.gz'
        with open(p, 'rb') as f, gzip.open(gz, 'wb') as g:
            g.write(f.read())
        plain = run('--trace', p, *SMALL)
        packed = run('--trace', gz, *SMALL)
        self.assertEqual(plain.returncode, 0, plain.stderr)
        self.assertEqual(packed.returncode, 0, packed.stderr)
        self.assertEqual(plain.stdout.replace(p, 'T'), packed.stdout.replace(gz, 'T'))
        with open(gz, 'rb') as f:
            blob = f.read()
        cut = os.path.join(self.dir, 'cut.csv.gz')
        with open(cut, 'wb') as f:
            f.write(blob[:len(blob) // 2])
        self.bad(['--trace', cut, *SMALL], 'cut.csv.gz', 'corrupt gzip data')

    def test_absurd_parameters_name_the_flag(self):
        p = os.path.join(self.dir, 't.csv')
        small_trace(p, 600)
        self.bad(['--trace', p, '--capacity-per-gpu', '0', '--sla', '5s'], 'capacity-per-gpu')
        self.bad(['--trace', p, '--sla', '5s'], 'capacity-per-gpu')  # required with a trace
        self.bad(['--trace', p, *SMALL, '--min-replicas', '50', '--max-replicas', '10'],
                 'min-replicas')
        self.bad(['--trace', p, *SMALL, '--cold-start', '2d'], 'cold-start')
        self.bad(['--trace', p, *SMALL, '--scale', '-1'], 'scale')
        self.bad(['--trace', p, *SMALL, '--bogus-key', '1'], '--bogus-key')
        self.bad(['--trace', p, *SMALL, '--policy', 'magic'], 'policy')
        self.bad(['--trace', p, *SMALL, '--start', '2h'], 'start')
        self.bad(['--trace', p, *SMALL, '--gpus-per-replica'], '--gpus-per-replica')
        self.bad(['--capacity-per-gpu', 'lots'], 'capacity-per-gpu')
        # demand-unit is accepted as a key but only requests is simulated: tokens is refused
        # by name (traces count requests)
        self.bad(['--trace', p, *SMALL, '--demand-unit', 'tokens'],
                 'demand-unit: tokens is not simulated')
        self.bad(['--trace', p, *SMALL, '--demand-unit', 'bytes'], 'not requests or tokens')
        r = run('--trace', p, *SMALL, '--demand-unit', 'requests')
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_unknown_flag_alone_is_unknown(self):
        r = self.bad(['--bogus'], 'unknown flag --bogus')
        self.assertNotIn('needs a value', r.stderr)
        # before its would-be value is taken: the next flag still counts
        self.bad(['--bogus', '--trace', 'x.csv'], 'unknown flag --bogus')
        r = self.bad(['--scale'], '--scale needs a value')
        self.assertNotIn('unknown', r.stderr)

    def test_overflowing_duration_is_out_of_range(self):
        p = os.path.join(self.dir, 't.csv')
        small_trace(p, 600)
        ref = self.bad(['--trace', p, *SMALL, '--cold-start', '25h'], 'out of range')
        for v in ('100000h', '99999999999999999999', '99999999999999999999s'):
            r = self.bad(['--trace', p, *SMALL, '--cold-start', v],
                         '--cold-start: %s is out of range (0s to 24h)' % v)
            self.assertNotIn('not a duration', r.stderr)
            self.assertEqual(r.stderr.replace(v, 'X'), ref.stderr.replace('25h', 'X'))
        self.bad(['--trace', p, *SMALL, '--cold-start', '5x'], 'not a duration')
        # a duration is decimal, as Go's: strtod also read hex and exponents
        for v in ('0x3C', '0x3Cs', '0x1p4s', '1e3s', '1e400'):
            self.bad(['--trace', p, *SMALL, '--cold-start', v],
                     "--cold-start: '%s' is not a duration" % v)

    def test_unwritable_outputs_fail_before_the_run(self):
        for flag in ('--report', '--timeline', '--json'):
            # exit 2 with nothing on stdout: refused before the run (before, the table was
            # printed and the run ended with exit 1 when it came to writing)
            self.bad([flag, os.path.join(self.dir, 'no', 'such', 'dir', 'out')],
                     '%s %s' % (flag, os.path.join(self.dir, 'no')), 'cannot write')
        self.bad(['--json', self.dir], '--json %s: cannot write: Is a directory' % self.dir)
        # a run that fails leaves an existing output as it was and creates none
        keep = self.write('keep.svg', 'old contents')
        new = os.path.join(self.dir, 'new.json')
        self.bad(['--trace', os.path.join(self.dir, 'nope.csv'), *SMALL, '--report', keep,
                  '--json', new], 'nope.csv')
        self.assertEqual(slurp(keep, 'r'), 'old contents')
        self.assertFalse(os.path.exists(new))
        # a run that succeeds replaces it
        p = os.path.join(self.dir, 't.csv')
        small_trace(p, 600)
        r = run('--trace', p, *SMALL, '--report', keep, '--json', new)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(slurp(keep, 'r').startswith('<?xml'))
        json.loads(slurp(new, 'r'))

    def test_a_failed_write_leaves_every_output_as_it_was(self):
        """Outputs are written in full beside their paths and put in place only when all
        are: a write that fails (here the file size limit, as a full disk) leaves every
        existing output as it was, creates none and leaves no temporary file; a stdout that
        cannot be written (/dev/full) is exit 1. Before, the timeline was replaced, the report
        truncated to the limit and kept, and stdout's errors were not seen (exit 0)."""
        import resource
        import signal
        p = os.path.join(self.dir, 't.csv')
        small_trace(p, 600)
        d = os.path.join(self.dir, 'fsz')
        os.mkdir(d)
        tl, svg = os.path.join(d, 'tl.csv'), os.path.join(d, 'r.svg')
        new = os.path.join(d, 'new.json')
        for path in (tl, svg):
            with open(path, 'w') as f:
                f.write('old contents')

        def limit():
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))

        args = ['--trace', p, *SMALL, '--policy', 'hpa', '--timeline', tl, '--report', svg,
                '--json', new]
        r = subprocess.run([BIN, 'simulate', *args], capture_output=True, text=True,
                           timeout=TIMEOUT, preexec_fn=limit)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn('--report %s: write failed: File too large' % svg, r.stderr)
        self.assertEqual(slurp(tl, 'r'), 'old contents')
        self.assertEqual(slurp(svg, 'r'), 'old contents')
        self.assertEqual(sorted(os.listdir(d)), ['r.svg', 'tl.csv'])
        # the same run without the limit replaces both, with their mode
        os.chmod(tl, 0o640)
        r = run(*args)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(slurp(tl, 'r').startswith('t_seconds,'))
        self.assertTrue(slurp(svg, 'r').startswith('<?xml'))
        self.assertEqual(os.stat(tl).st_mode & 0o777, 0o640)
        self.assertEqual(sorted(os.listdir(d)), ['new.json', 'r.svg', 'tl.csv'])
        # stdout
        for extra in ([], ['--json', '-']):
            with open('/dev/full', 'w') as full:
                r = subprocess.run([BIN, 'simulate', '--trace', p, *SMALL, '--policy', 'hpa',
                                    *extra], stdout=full, stderr=subprocess.PIPE, text=True,
                                   timeout=TIMEOUT)
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertIn('stdout: write failed: No space left on device', r.stderr)

    def test_config_errors_name_the_line(self):
        cfg = self.write('bad.yaml', 'capacity-per-gpu: 10\nsla: 5s\nno-such-key: 3\n')
        self.bad(['--config', cfg], 'bad.yaml:3', 'no-such-key')
        cfg = self.write('bad2.yaml', 'capacity-per-gpu: 10\nmin-replicas: many\n')
        self.bad(['--config', cfg], 'bad2.yaml:2', 'min-replicas')
        cfg = self.write('bad3.yaml', 'capacity-per-gpu: [10\n')
        self.bad(['--config', cfg], 'bad3.yaml')

    def test_one_off_grid_row_is_refused(self):
        """One row 30 s after the last of 5,760 rows 60 s apart re-read the whole trace as
        30 s buckets, every other one empty: a demand peak of 15 req/s instead of 10."""
        rows = ['%d,600' % (60 * k) for k in range(5760)] + ['%d,600' % (60 * 5759 + 30)]
        p = self.write('m60odd.csv', 't_seconds,requests\n' + '\n'.join(rows) + '\n')
        self.bad(['--trace', p, *SMALL],
                 "m60odd.csv:5762: t_seconds '345570' is off the 60 s grid that starts at 0 s")

    def test_missing_buckets_are_counted(self):
        rows = ['%d,600' % (60 * k) for k in range(60) if k not in (20, 21, 40)]
        p = self.write('gaps.csv', 't_seconds,requests\n' + '\n'.join(rows) + '\n')
        j = os.path.join(self.dir, 'gaps.json')
        r = run('--trace', p, *SMALL, '--policy', 'reactive', '--json', j)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn('\n  missing   3 of the trace\'s 60 buckets have no row (replayed as no '
                      'traffic)\n', r.stdout)
        self.assertEqual(json.loads(slurp(j, 'r'))['trace']['missing_buckets'], 3)

    def test_comma_decimals_and_numeric_headers_are_refused(self):
        p = self.write('comma.csv', 't_seconds,requests\n0,5,5\n1,6,5\n2,7,5\n')
        self.bad(['--trace', p, *SMALL], "comma.csv:2: '0,5,5' has a number in column 3, but "
                 "the header names 2 columns")
        p = self.write('nan.csv', 'nan,nan\n0,5\n1,6\n')
        self.bad(['--trace', p, *SMALL], "nan.csv:1: t_seconds 'nan' is not finite")

    def test_errors_across_keys_name_where_the_key_was_set(self):
        p = os.path.join(self.dir, 't.csv')
        small_trace(p, 600)
        cfg = self.write('ir.yaml', 'trace: t.csv\ninitial-replicas: 50\nmax-replicas: 10\n'
                                    'capacity-per-gpu: 10\nsla: 5s\n')
        self.bad(['--config', cfg], 'gpuscaler simulate: %s:2: initial-replicas: 50 is outside '
                 '[min-replicas 1, max-replicas 10]' % cfg)
        self.bad(['--config', cfg, '--initial-replicas', '40'], 'gpuscaler simulate: '
                 '--initial-replicas: 40 is outside [min-replicas 1, max-replicas 10]')
        self.bad(['--trace', p, *SMALL, '--min-replicas', '70'],
                 'gpuscaler simulate: --min-replicas: 70 is above max-replicas 60')

    def test_empty_paths_and_contradicting_tags_are_refused(self):
        for flag in ('--trace=', '--config=', '--json=', '--report='):
            self.bad([flag, *SMALL], 'gpuscaler simulate: %s: missing value' % flag[:-1])
        self.bad(['--trace', '', *SMALL], 'gpuscaler simulate: --trace: missing value')
        for text in ('trace: ~\n', 'trace:\n', 'trace: ""\n'):
            cfg = self.write('e.yaml', 'capacity-per-gpu: 10\n' + text)
            self.bad(['--config', cfg], '%s:2: trace: missing value' % cfg)
        cfg = self.write('s.yaml', 'trace: [a.csv, b.csv]\n')
        self.bad(['--config', cfg], '%s:1: trace: expected a path, found a sequence' % cfg)
        # a core tag is checked, not dropped (`scale: !!null 2` set 2)
        cfg = self.write('t.yaml', 'trace: t.csv\nscale: !!null 2\n')
        self.bad(['--config', cfg], "%s:2: tag '!!null' on '2', which is not null" % cfg)
        cfg = self.write('t2.yaml', 'trace: t.csv\npolicy: !!int oracle\n')
        self.bad(['--config', cfg], "%s:2: tag '!!int' on 'oracle', which is not an integer"
                 % cfg)

    def test_help(self):
        r = run('--help')
        self.assertEqual(r.returncode, 0)
        for k in ('capacity-per-gpu', 'service-time', 'hpa-tolerance', '--timeline'):
            self.assertIn(k, r.stdout)


if __name__ == '__main__':
    unittest.main(verbosity=2)
