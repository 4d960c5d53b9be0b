// SPDX-License-Identifier: Apache-2.0
// gpuscaler's baseline load test for real clusters: a constant arrival rate of RATE requests/s
// (constant-arrival-rate, open loop) for DURATION against /v1/completions, with the same
// thresholds as peak.js (p(99) of http_req_duration < SLA_MS, http_req_failed rate <
// MAX_ERROR_RATE) and the same SUMMARY_PATH gate document.  Use it to profile what one replica
// sustains at your SLA (gpuscaler.io/capacity-per-gpu) and as a steady reference run.
//
//   k6 run -e TARGET_URL=http://llm.example:8000 -e RATE=4 -e DURATION=5m e2e/k6/baseline.js
//
// Parameters (environment, see lib/profile.js DEFAULTS): TARGET_URL, RATE, SLA_MS, DURATION,
// MODEL, MAX_TOKENS, MAX_ERROR_RATE, MAX_VUS, SUMMARY_PATH.
// e2e/cluster/loadgen.py --profile constant runs the same test.
import http from "k6/http";
import { check } from "k6";
import { gateSummary, params, requestBody, textSummary, thresholds } from "./lib/profile.js";

const P = params(__ENV);

export const options = {
  scenarios: {
    baseline: {
      executor: "constant-arrival-rate",
      rate: Math.round(P.rate * 60),
      timeUnit: "1m",
      duration: Math.round(P.durationS) + "s",
      preAllocatedVUs: Math.min(P.maxVUs, Math.max(5, Math.ceil(P.rate * P.slaMs / 1000))),
      maxVUs: P.maxVUs,
      gracefulStop: "30s",
    },
  },
  thresholds: thresholds(P.slaMs, P.maxErrorRate),
  summaryTrendStats: ["avg", "min", "med", "max", "p(90)", "p(95)", "p(99)"],
  discardResponseBodies: true,
};

const ENDPOINT = P.targetUrl + "/v1/completions";
const BODY = requestBody(P);
const REQ = {
  headers: { "Content-Type": "application/json" },
  timeout: "60s",
  tags: { name: "completions" },
};

export default function () {
  const res = http.post(ENDPOINT, BODY, REQ);
  check(res, { "status is 2xx": (r) => r.status >= 200 && r.status < 300 });
}

export function handleSummary(data) {
  const s = gateSummary(data, P, "baseline");
  const out = { stdout: textSummary(s) };
  out[P.summaryPath] = JSON.stringify(s, null, 1) + "\n";
  return out;
}
