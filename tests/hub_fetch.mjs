// Sends calls the way the hub does: node's global fetch, one keep-alive pool,
// a string body, calls one after another. Reads a job from stdin:
//   {"url": "...", "method": "POST", "body": "...", "timeout_ms": 60000,
//    "calls": [{"headers": {"name": "value", ...}, "body": "..."}, ...]}
// (a call's own "body" replaces the job's)
// and writes one result per call to stdout, as JSON:
//   {"status": 413, "content_type": "...", "text": "..."} or {"error": "...", "cause": "..."}
let input = '';
for await (const chunk of process.stdin) input += chunk;
const job = JSON.parse(input);
const results = [];
for (const call of job.calls) {
  try {
    const response = await fetch(job.url, {
      method: job.method,
      headers: call.headers,
      body: (call.body ?? job.body) || undefined,
      signal: AbortSignal.timeout(job.timeout_ms),
    });
    results.push({
      status: response.status,
      content_type: response.headers.get('content-type') ?? '',
      text: await response.text(),
    });
  } catch (error) {
    results.push({error: String(error), cause: String(error?.cause ?? '')});
  }
}
process.stdout.write(JSON.stringify(results));
