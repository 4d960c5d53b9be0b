// SPDX-License-Identifier: Apache-2.0
// gpuscaler's peak load test for real clusters: the 2 PM - 8 PM afternoon (peak 4-6 PM)
// compressed into DURATION, as open-loop arrivals (ramping-arrival-rate) against an
// OpenAI-style /v1/completions endpoint; thresholds p(99) of http_req_duration < SLA_MS and
// http_req_failed rate < MAX_ERROR_RATE; handleSummary writes SUMMARY_PATH, a JSON document
// with "pass" a CI job can gate on (k6 itself exits 99 when a threshold is crossed).
//
//   k6 run -e TARGET_URL=http://llm.example:8000 -e SLA_MS=2000 -e PEAK_RPS=20 \
//          -e DURATION=12m -e MODEL=meta-llama/Meta-Llama-3-8B-Instruct e2e/k6/peak.js
//
// Parameters (environment, see lib/profile.js DEFAULTS): TARGET_URL, SLA_MS, PEAK_RPS,
// DURATION, MODEL, MAX_TOKENS, MAX_ERROR_RATE, MAX_VUS, SUMMARY_PATH.
// e2e/cluster/loadgen.py --profile peak runs the same profile with the same thresholds.
import http from "k6/http";
import { check } from "k6";
import {
  buildStages, gateSummary, params, requestBody, textSummary, thresholds,
} from "./lib/profile.js";

const P = params(__ENV);
const S = buildStages(P.peakRps, P.durationS);

export const options = {
  scenarios: {
    peak: {
      executor: "ramping-arrival-rate",
      startRate: S.startRate,
      timeUnit: S.timeUnit,
      stages: S.stages,
      preAllocatedVUs: Math.min(P.maxVUs, Math.max(10, Math.ceil(P.peakRps * P.slaMs / 1000))),
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
  const s = gateSummary(data, P, "peak");
  s.stages = S;
  const out = { stdout: textSummary(s) };
  out[P.summaryPath] = JSON.stringify(s, null, 1) + "\n";
  return out;
}
