// SPDX-License-Identifier: Apache-2.0
// The load profile, parameters and thresholds of gpuscaler's k6 scripts (peak.js, baseline.js).
// Pure JavaScript, no k6 import, so node can run it; e2e/cluster/profile.py holds the same
// values for the Python load generator and e2e/test_k6.py checks that the two agree.
//
// The peak profile is one afternoon of an inference service, 2 PM to 8 PM, compressed into
// DURATION: PEAK_RPS x 0.3 at 2 PM, 0.5 at 3 PM, the peak from 4 PM to 6 PM, 0.5 at 7 PM and
// 0.3 at 8 PM, ramping linearly in between.  Rates are per minute (timeUnit 1m, rounded half
// up) so small peaks keep their shape; stage durations are whole seconds.

// Environment variables and their defaults (the local cluster's Service front).
export const DEFAULTS = {
  "TARGET_URL": "http://127.0.0.2:8080",
  "SLA_MS": 2000,
  "PEAK_RPS": 20,
  "DURATION": "10m",
  "MODEL": "fake-model",
  "MAX_TOKENS": 16,
  "MAX_ERROR_RATE": 0.01,
  "MAX_VUS": 300,
  "RATE": 5,
  "SUMMARY_PATH": "k6-summary.json"
};

// Rate as a fraction of PEAK_RPS; stage lengths in (compressed) hours of the afternoon.
export const SHAPE = {
  "clock_start": "14:00",
  "start": 0.3,
  "stages": [
    {"hours": 1, "target": 0.5},
    {"hours": 1, "target": 1.0},
    {"hours": 2, "target": 1.0},
    {"hours": 1, "target": 0.5},
    {"hours": 1, "target": 0.3}
  ]
};

export const PROMPT = "Write one sentence about autoscaling GPU inference servers.";

// k6 durations ('10m', '90s', '1h30m', '1500ms') or a bare number of seconds -> seconds.
export function parseDuration(s) {
  if (typeof s === "number") {
    return s;
  }
  s = String(s).trim();
  if (/^\d+(\.\d+)?$/.test(s)) {
    return parseFloat(s);
  }
  const unit = { ms: 0.001, h: 3600, m: 60, s: 1 };
  const re = /(\d+(?:\.\d+)?)(ms|h|m|s)/g;
  let total = 0;
  let pos = 0;
  let m;
  while ((m = re.exec(s)) !== null) {
    if (m.index !== pos) {
      throw new Error("bad duration: " + s);
    }
    total += parseFloat(m[1]) * unit[m[2]];
    pos = re.lastIndex;
  }
  if (pos === 0 || pos !== s.length) {
    throw new Error("bad duration: " + s);
  }
  return total;
}

// The ramping-arrival-rate scenario's rates and stages (same arithmetic as profile.py).
export function buildStages(peakRps, durationS, shape) {
  shape = shape || SHAPE;
  let hours = 0;
  for (const st of shape.stages) {
    hours += st.hours;
  }
  const stages = shape.stages.map((st) => ({
    duration: Math.round(durationS * st.hours / hours) + "s",
    target: Math.round(peakRps * 60 * st.target),
  }));
  return { startRate: Math.round(peakRps * 60 * shape.start), timeUnit: "1m", stages: stages };
}

// The thresholds a CI job gates on.
export function thresholds(slaMs, maxErrorRate) {
  return {
    http_req_duration: ["p(99)<" + slaMs],
    http_req_failed: ["rate<" + maxErrorRate],
  };
}

// Read the parameters from k6's __ENV (or any object), falling back to DEFAULTS.
export function params(env) {
  const get = (k) => (env && env[k] !== undefined && env[k] !== "" ? env[k] : DEFAULTS[k]);
  return {
    targetUrl: String(get("TARGET_URL")).replace(/\/+$/, ""),
    slaMs: Number(get("SLA_MS")),
    peakRps: Number(get("PEAK_RPS")),
    duration: String(get("DURATION")),
    durationS: parseDuration(get("DURATION")),
    model: String(get("MODEL")),
    maxTokens: Number(get("MAX_TOKENS")),
    maxErrorRate: Number(get("MAX_ERROR_RATE")),
    maxVUs: Number(get("MAX_VUS")),
    rate: Number(get("RATE")),
    summaryPath: String(get("SUMMARY_PATH")),
  };
}

// The gate document handleSummary writes (same keys as loadgen.py's summary line).
export function gateSummary(data, p, profileName) {
  const m = data.metrics || {};
  const dur = (m.http_req_duration && m.http_req_duration.values) || {};
  const failed = (m.http_req_failed && m.http_req_failed.values) || {};
  const reqs = (m.http_reqs && m.http_reqs.values) || {};
  const dropped = (m.dropped_iterations && m.dropped_iterations.values) || {};
  const results = {};
  let pass = true;
  for (const name of ["http_req_duration", "http_req_failed"]) {
    results[name] = {};
    const th = (m[name] && m[name].thresholds) || {};
    for (const expr of Object.keys(th)) {
      results[name][expr] = th[expr].ok;
      pass = pass && th[expr].ok;
    }
  }
  const pick = ["avg", "min", "med", "max", "p(90)", "p(95)", "p(99)"];
  const durMs = {};
  for (const k of pick) {
    durMs[k] = dur[k] === undefined ? null : dur[k];
  }
  return {
    type: "summary",
    tool: "k6",
    profile: profileName,
    target_url: p.targetUrl,
    pass: pass,
    thresholds: results,
    http_req_duration_ms: durMs,
    http_req_failed_rate: failed.rate === undefined ? 0 : failed.rate,
    http_reqs: reqs.count || 0,
    dropped_iterations: dropped.count || 0,
    duration_s: data.state && data.state.testRunDurationMs !== undefined ?
      data.state.testRunDurationMs / 1000 : null,
    sla_ms: p.slaMs,
    max_error_rate: p.maxErrorRate,
  };
}

// A short human summary for stdout (no remote jslib import: works offline).
export function textSummary(s) {
  const d = s.http_req_duration_ms;
  const f = (v) => (v === null || v === undefined ? "-" : v.toFixed(1));
  const lines = [
    "gpuscaler k6 " + s.profile + " against " + s.target_url + ": " + (s.pass ? "PASS" : "FAIL"),
    "  requests " + s.http_reqs + ", failed rate " + (100 * s.http_req_failed_rate).toFixed(2) +
      " %, dropped iterations " + s.dropped_iterations,
    "  latency ms: med " + f(d.med) + "  p(95) " + f(d["p(95)"]) + "  p(99) " + f(d["p(99)"]) +
      "  max " + f(d.max),
  ];
  for (const name of Object.keys(s.thresholds)) {
    for (const expr of Object.keys(s.thresholds[name])) {
      lines.push("  threshold " + name + " " + expr + ": " +
        (s.thresholds[name][expr] ? "ok" : "CROSSED"));
    }
  }
  return lines.join("\n") + "\n";
}

// The request every iteration sends (OpenAI completions API).
export function requestBody(p) {
  return JSON.stringify({ model: p.model, prompt: PROMPT, max_tokens: p.maxTokens,
    temperature: 0 });
}
