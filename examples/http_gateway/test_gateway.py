#!/usr/bin/env python3
"""End-to-end test of http_gateway: starts gateways on free ports and drives them with curl.

usage: test_gateway.py <http_gateway> <curl>   (REDLIMIT_URL names a private redis-server)

Checks, against Redis and with --local: the 11th request of an API key within a second gets 429
with Retry-After and the RateLimit fields of draft-ietf-httpapi-ratelimit-headers-10; another key
is independent; without a key the client's IP is limited; a malformed request gets 400; two
gateways share a key's daily quota through Redis; with Redis down the answer is 503 at once,
without a RateLimit field (the gateway knows nothing of the quota then);
SIGTERM stops the gateway with exit status 0 (which main() only returns when uv_loop_close()
succeeded), also with an idle keep-alive connection open.

GET /metrics, never rate limited, answers the Prometheus text exposition: `promtool check
metrics` accepts it, prometheus_client parses it, and its decision counts are the requests made
(each source counted apart), and no key is a label. The alert examples of docs/operations.md
pass `promtool check rules`. promtool (Debian package prometheus) and the prometheus_client
module (python3-prometheus-client) are required: without them the test fails.
"""

import base64
import os
import re
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

GATEWAY, CURL = sys.argv[1], sys.argv[2]
# A List of Items: "name";r=<int>;t=<int>;pk=:<base64>: (RFC 9651 serialization, one member).
RATELIMIT = re.compile(
    r'^"(?P<name>[a-z-]+)";r=(?P<r>\d+);t=(?P<t>\d+);pk=:(?P<pk>[A-Za-z0-9+/=]+):$')


class Failure(Exception):
    pass


def check(condition, message):
    if not condition:
        raise Failure(message)


def partition_key(partition):
    """The gateway's pk: FNV-1a 64 of the partition, big-endian, base64 (redlimit/ratelimit_fields.hpp)."""
    digest = 14695981039346656037
    for byte in partition.encode():
        digest = ((digest ^ byte) * 1099511628211) % 2**64
    return base64.b64encode(struct.pack(">Q", digest)).decode()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Gateway:
    """One http_gateway process on a free port; its stderr goes to a temporary file."""

    def __init__(self, *args, daily=1000):
        self.args = [GATEWAY, "--port", "0", "--rate", "10/s", "--daily", str(daily), *args]
        self.policy = f'"daily";q={daily};w=86400, "rate";q=10;w=1'
        self.stderr = tempfile.TemporaryFile()
        self.process = subprocess.Popen(self.args, stdout=subprocess.PIPE, stderr=self.stderr)
        try:
            line = self._first_line(timeout=10)
            match = re.fullmatch(r"listening 127\.0\.0\.1:(\d+)", line)
            check(match, f"{self}: expected 'listening 127.0.0.1:<port>' first, got {line!r}")
        except Failure:
            self.kill()
            raise
        self.port = int(match.group(1))
        self.base = f"http://127.0.0.1:{self.port}"

    def __str__(self):
        return " ".join(self.args)

    def _first_line(self, timeout):
        data = b""
        deadline = time.monotonic() + timeout
        fd = self.process.stdout.fileno()
        while not data.endswith(b"\n"):
            left = deadline - time.monotonic()
            ready, _, _ = select.select([fd], [], [], max(left, 0))
            if not ready:
                raise Failure(f"{self}: no 'listening' line within {timeout} s{self.log()}")
            chunk = os.read(fd, 256)
            if not chunk:
                status = self.process.wait()
                raise Failure(f"{self}: exited ({status}) before listening{self.log()}")
            data += chunk
        return data.decode().strip()

    def log(self):
        self.stderr.seek(0)
        text = self.stderr.read().decode(errors="replace").strip()
        return f"\n--- gateway stderr ---\n{text}" if text else ""

    def terminate(self, timeout=5):
        """SIGTERM to its PID; the gateway must exit 0 within `timeout` seconds."""
        self.process.send_signal(signal.SIGTERM)
        try:
            status = self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise Failure(f"{self}: still running {timeout} s after SIGTERM{self.log()}")
        check(status == 0, f"{self}: exit status {status} after SIGTERM, expected 0{self.log()}")

    def kill(self):
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


class Response:
    def __init__(self, status, headers, body):
        self.status, self.headers, self.body = status, headers, body

    def header(self, name):
        values = [v for k, v in self.headers if k.lower() == name.lower()]
        return values[0] if len(values) == 1 else None

    def __str__(self):
        lines = [f"HTTP {self.status}"] + [f"{k}: {v}" for k, v in self.headers]
        return "\n".join(lines) + "\n\n" + self.body.decode(errors="replace")


def parse_responses(data):
    """Splits `curl -i` output (one or more HTTP/1.1 responses) into Responses."""
    responses = []
    while data:
        head, separator, data = data.partition(b"\r\n\r\n")
        check(separator, f"no end of header section in {head!r}")
        lines = head.decode("latin-1").split("\r\n")
        status = re.match(r"HTTP/1\.1 (\d{3}) ", lines[0])
        check(status, f"bad status line {lines[0]!r}")
        headers = [tuple(part.strip() for part in line.split(":", 1)) for line in lines[1:]]
        length = int(dict((k.lower(), v) for k, v in headers).get("content-length", "0"))
        responses.append(Response(int(status.group(1)), headers, data[:length]))
        data = data[length:]
    return responses


def curl(urls, *options, timeout=10):
    """Requests every URL in one curl process (one keep-alive connection); the responses."""
    command = [CURL, "-s", "-i", "--max-time", str(timeout), *options, *urls]
    result = subprocess.run(command, capture_output=True, timeout=timeout + 5)
    check(result.returncode == 0,
          f"{' '.join(command)}: curl exit status {result.returncode}: {result.stderr.decode()}")
    responses = parse_responses(result.stdout)
    check(len(responses) == len(urls), f"{len(urls)} requests, {len(responses)} responses")
    return responses


def check_fields(gateway, response, what, partition, status):
    """The status, RateLimit-Policy and RateLimit of `response`; returns RateLimit's parameters."""
    check(response.status == status,
          f"{what}: status {response.status}, expected {status}:\n{response}")
    check(response.header("RateLimit-Policy") == gateway.policy,
          f"{what}: RateLimit-Policy should be exactly {gateway.policy!r}:\n{response}")
    field = response.header("RateLimit")
    match = RATELIMIT.match(field or "")
    check(match,
          f'{what}: no single RateLimit field of the form "name";r=N;t=N;pk=:B64::\n{response}')
    check(match.group("pk") == partition_key(partition),
          f"{what}: pk {match.group('pk')} is not that of partition {partition!r}")
    return match.groupdict()


def check_denied(gateway, response, what, partition, policy="rate"):
    """A 429 from `policy` with Retry-After, the RateLimit fields and a quota-exceeded problem."""
    fields = check_fields(gateway, response, what, partition, 429)
    retry_after = response.header("Retry-After")
    check(retry_after is not None and retry_after.isdigit() and int(retry_after) >= 1,
          f"{what}: Retry-After should be a delay of at least 1 s:\n{response}")
    check(fields["name"] == policy and fields["r"] == "0",
          f"{what}: RateLimit should name {policy!r} with r=0:\n{response}")
    check(int(retry_after) >= int(fields["t"]),
          f"{what}: Retry-After earlier than t (draft-10 section 6):\n{response}")
    check(response.header("Content-Type") == "application/problem+json"
          and f'"violated-policies":["{policy}"]'.encode() in response.body,
          f"{what}: the body should be a quota-exceeded problem naming {policy!r}:\n{response}")


def check_allowed(gateway, urls, what, partition, policy, remaining, options):
    """Requests every URL: each is allowed, RateLimit names `policy` and r counts down from
    `remaining`. Returns the response to one more request, sent on the same connection."""
    responses = curl(urls + [urls[-1]], *options)
    for i, response in enumerate(responses[:-1]):
        fields = check_fields(gateway, response, f"{what}, request {i + 1}", partition, 200)
        check(fields["name"] == policy and int(fields["r"]) == remaining - i,
              f"{what}, request {i + 1}: expected {policy!r} with r={remaining - i}:\n{response}")
    return responses[-1]


def check_burst(gateway, what, partition, options=()):
    """10 requests within a second pass with r counting down 9..0; the 11th gets 429."""
    start = time.monotonic()
    try:
        urls = [gateway.base + f"/{i}" for i in range(10)]
        last = check_allowed(gateway, urls, what, partition, "rate", 9, options)
        check_denied(gateway, last, f"{what}, request 11", partition)
    except Failure as e:
        elapsed = time.monotonic() - start
        raise Failure(f"{e}\n(the 11 requests took {elapsed:.3f} s with curl's start; "
                      "gcra 10/s frees a permit every 100 ms)") from None


def check_malformed(gateway, partition):
    """400 for bytes http_parser rejects, counted against the IP even when a key came first."""
    response = curl([gateway.base + "/"], "-H", "X-API-Key: M", "-H", "Content-Length: abc")[0]
    check_fields(gateway, response, "malformed Content-Length", partition, 400)
    check(response.header("Connection") == "close",
          f"malformed request: the connection should close:\n{response}")
    with socket.create_connection(("127.0.0.1", gateway.port), timeout=5) as s:
        s.sendall(b"NOT HTTP AT ALL\r\n\r\n")
        data = b""
        while chunk := s.recv(4096):
            data += chunk
    check(data.startswith(b"HTTP/1.1 400 "),
          f"garbage request: expected a 400 and EOF, got {data!r}")


def check_idle_connection_on_sigterm(gateway):
    """SIGTERM with a keep-alive connection waiting for its next request: exit 0 at once (not
    after the 10 s idle timeout), and EOF on that connection."""
    with socket.create_connection(("127.0.0.1", gateway.port), timeout=5) as s:
        s.sendall(b"GET / HTTP/1.1\r\nHost: test\r\nX-API-Key: idle\r\n\r\n")
        data = b""
        while b"\r\n\r\nok\n" not in data:
            chunk = s.recv(4096)
            check(chunk, f"idle connection: EOF before a whole response: {data!r}")
            data += chunk
        check(data.startswith(b"HTTP/1.1 200 ") and b"Connection: keep-alive" in data,
              f"idle connection: expected a keep-alive 200, got {data!r}")
        gateway.terminate()
        check(s.recv(4096) == b"", "idle connection: expected EOF after SIGTERM")


METRICS_TYPE = "text/plain; version=0.0.4; charset=utf-8"
SOURCES = ("redis", "local", "deny_cache", "fallback", "fail_open", "fail_closed")


def parse_metrics(text):
    """Checks `text` with `promtool check metrics` and parses it with prometheus_client; returns
    {(sample name, frozenset of its labels): value}."""
    promtool = shutil.which("promtool")
    check(promtool, "promtool not found: install Debian's prometheus package (scripts/install-deps)")
    result = subprocess.run([promtool, "check", "metrics"], input=text.encode(),
                            capture_output=True, timeout=30)
    check(result.returncode == 0,
          f"promtool check metrics: exit status {result.returncode}:\n"
          f"{result.stdout.decode()}{result.stderr.decode()}\n--- the text ---\n{text}")
    try:
        from prometheus_client.parser import text_string_to_metric_families
    except ImportError as e:
        raise Failure(f"{sys.executable} cannot import prometheus_client ({e}): install Debian's "
                      "python3-prometheus-client (scripts/install-deps)") from None
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return samples


def scrape(gateway):
    """GET /metrics of `gateway`: a 200 with the exposition, parsed (see parse_metrics)."""
    response = curl([gateway.base + "/metrics"])[0]
    check(response.status == 200 and response.header("Content-Type") == METRICS_TYPE,
          f"/metrics: expected 200 with Content-Type {METRICS_TYPE!r}:\n{response}")
    check(response.header("RateLimit") is None, f"/metrics is not rate limited:\n{response}")
    return parse_metrics(response.body.decode())


def decisions(samples, result, source):
    """The gateway limiter's decisions counted with `result` and `source`."""
    labels = frozenset({"limiter": "http_gateway", "result": result, "source": source}.items())
    key = ("redlimit_decisions_total", labels)
    check(key in samples, f"/metrics: no sample redlimit_decisions_total{dict(labels)}")
    return samples[key]


def check_decisions(samples, what, expected):
    """Every result x source count is in `samples`: those of `expected` ({(result, source):
    count}) as given, the others 0."""
    for result in ("allowed", "denied"):
        for source in SOURCES:
            count = decisions(samples, result, source)
            want = expected.get((result, source), 0)
            check(count == want,
                  f"{what}: redlimit_decisions_total{{result={result!r},source={source!r}}} is "
                  f"{count:g}, expected {want}")


def check_metrics_endpoint(gateway, what, expected):
    """/metrics counts the decisions `expected` ({(result, source): count}); 15 more scrapes on
    one connection, faster than the rate (10/s) allows, all pass and count no decision; a POST
    gets 405."""
    response = curl([gateway.base + "/metrics"])[0]
    for key in (b"key:", b"ip:127.0.0.1"):
        check(key not in response.body, f"{what}: a key ({key!r}) must never be a label:\n"
                                        f"{response.body.decode()}")
    samples = scrape(gateway)
    check_decisions(samples, what, expected)
    responses = curl([gateway.base + "/metrics"] * 15)
    check(all(r.status == 200 for r in responses),
          f"{what}: a burst of scrapes must never be limited:\n{responses[-1]}")
    check_decisions(scrape(gateway), f"{what}, after 16 scrapes", expected)
    response = curl([gateway.base + "/metrics"], "-X", "POST")[0]
    check(response.status == 405 and response.header("Allow") == "GET, HEAD",
          f"{what}: POST /metrics: expected 405 with Allow: GET, HEAD:\n{response}")
    return samples


def test_redis():
    check(os.environ.get("REDLIMIT_URL"),
          "REDLIMIT_URL is not set (run through scripts/with-redis)")
    # Why: the daily quota is a UTC-aligned window; the test must not straddle midnight.
    seconds_left = 86400 - time.time() % 86400
    if seconds_left < 60:
        time.sleep(seconds_left + 1)
    # --redis defaults to $REDLIMIT_URL. A daily quota of 15 lets the test reach it.
    gateway = Gateway(daily=15)
    try:
        check_malformed(gateway, "ip:127.0.0.1")
        time.sleep(0.5)  # the IP's rate is full again: 2 requests took 200 ms of it
        check_burst(gateway, "key A", "key:A", ["-H", "X-API-Key: A"])
        response = curl([gateway.base + "/"], "-H", "X-API-Key: B")[0]
        check_fields(gateway, response, "key B after A", "key:B", 200)
        check_burst(gateway, "no key", "ip:127.0.0.1")
        response = curl([gateway.base + "/"], "-H", "X-API-Key: C")[0]
        check_fields(gateway, response, "key C after the IP", "key:C", 200)
        # Allowed: 2 malformed, 10 of A, B, 10 of the IP, C; denied: the 11th of A and of the IP.
        samples = check_metrics_endpoint(gateway, "Redis",
                                         {("allowed", "redis"): 24, ("denied", "redis"): 2})
        check(samples[("redlimit_redis_round_trips_total", frozenset())] >= 26,
              "Redis: each decision is at least one round trip to Redis")
        check(samples[("redlimit_redis_circuit_breakers", frozenset({"state": "closed"}.items()))]
              == 1, "Redis: the server's circuit breaker is closed")

        # A second gateway shares key A's state through Redis: once A's rate is full again,
        # 5 of its daily 15 are left, and the daily quota is what denies next.
        second = Gateway(daily=15)
        try:
            time.sleep(1.1)
            urls = [second.base + "/"] * 5
            last = check_allowed(second, urls, "key A, 2nd gateway", "key:A", "daily", 4,
                                 ["-H", "X-API-Key: A"])
            check_denied(second, last, "key A, 2nd gateway, request 6", "key:A", "daily")
            second.terminate()
        finally:
            second.kill()
        check_idle_connection_on_sigterm(gateway)
    finally:
        gateway.kill()


def test_global_limit():
    """--global-rate: each key's limits and the limit of all keys together are one decision.
    RateLimit names the binding quota (the global one, with its own partition, once it has the
    fewest permits left), and a request the global limit denies spends nothing of its key's."""
    # Why: the daily quota is a UTC-aligned window; the test must not straddle midnight.
    seconds_left = 86400 - time.time() % 86400
    if seconds_left < 60:
        time.sleep(seconds_left + 1)
    gateway = Gateway("--global-rate", "5/min", daily=6)
    gateway.policy += ', "global";q=5;w=60'
    try:
        urls = [gateway.base + f"/{i}" for i in range(5)]
        last = check_allowed(gateway, urls, "key G, global 5/min", "all", "global", 4,
                             ["-H", "X-API-Key: G"])
        check_denied(gateway, last, "key G, request 6", "all", "global")
        for response in curl([gateway.base + "/"] * 2, "-H", "X-API-Key: G"):
            check_denied(gateway, response, "key G, requests 7 and 8", "all", "global")
        # Without the global limit, key G has 1 of its daily 6 left: the 3 requests the global
        # limit denied took none of them.
        per_key = Gateway(daily=6)
        try:
            response = curl([per_key.base + "/"], "-H", "X-API-Key: G")[0]
            fields = check_fields(per_key, response, "key G without the global limit", "key:G",
                                  200)
            check(fields["name"] == "daily" and fields["r"] == "0",
                  f"key G's daily quota should have 0 left after its 6th request:\n{response}")
            per_key.terminate()
        finally:
            per_key.kill()
        gateway.terminate()
    finally:
        gateway.kill()


def test_local():
    gateway = Gateway("--local")
    try:
        check_burst(gateway, "--local, key A", "key:A", ["-H", "X-API-Key: A"])
        response = curl([gateway.base + "/"], "-H", "X-API-Key: B")[0]
        check_fields(gateway, response, "--local, key B", "key:B", 200)
        samples = check_metrics_endpoint(gateway, "--local",
                                         {("allowed", "local"): 11, ("denied", "local"): 1})
        check(samples[("redlimit_redis_round_trips_total", frozenset())] == 0,
              "--local: no round trip to Redis")
        gateway.terminate()
    finally:
        gateway.kill()


def test_redis_down():
    """Fail-closed: 503 with Retry-After and a body saying why, without waiting on Redis. The
    gateway then knows nothing of the partition's quota: RateLimit-Policy still describes the
    quotas, but no RateLimit field claims any remaining quota (r=0 would tell the client that
    its quota is used up, and it is not)."""
    gateway = Gateway("--redis", f"redis://127.0.0.1:{free_port()}")
    try:
        for i in range(5):
            start = time.monotonic()
            response = curl([gateway.base + "/"], "-H", "X-API-Key: A")[0]
            elapsed = time.monotonic() - start
            what = f"Redis down, request {i + 1}"
            check(elapsed < 2, f"{what}: the answer took {elapsed:.2f} s")
            check(response.status == 503,
                  f"{what}: status {response.status}, expected 503:\n{response}")
            check(response.header("RateLimit-Policy") == gateway.policy,
                  f"{what}: RateLimit-Policy should be exactly {gateway.policy!r}:\n{response}")
            check(not any(k.lower() == "ratelimit" for k, _ in response.headers),
                  f"{what}: a 503 must not send a RateLimit field (it claims a quota state the "
                  f"gateway does not know):\n{response}")
            check(response.header("Retry-After") == "1",
                  f"{what}: expected Retry-After: 1:\n{response}")
            check(b"Redis did not answer" in response.body,
                  f"{what}: the body should say why:\n{response}")
        samples = check_metrics_endpoint(gateway, "Redis down", {("denied", "fail_closed"): 5})
        errors = sum(value for (name, _), value in samples.items()
                     if name == "redlimit_redis_errors_total")
        # At least: the client's own commands (the counts it sends every second) fail too.
        check(errors >= 5, f"Redis down: {errors:g} Redis errors counted, expected at least one "
                           "per request")
        gateway.terminate()
    finally:
        gateway.kill()


def test_alert_rules():
    """The alert examples of docs/operations.md are rules `promtool check rules` accepts."""
    docs = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs",
                        "operations.md")
    with open(docs, encoding="utf-8") as f:
        found = re.search(r"```yaml\n(groups:.*?)```", f.read(), re.S)
    check(found, f"{docs}: no ```yaml block of alert rules")
    promtool = shutil.which("promtool")
    check(promtool, "promtool not found: install Debian's prometheus package (scripts/install-deps)")
    with tempfile.NamedTemporaryFile("w", suffix=".yml") as rules:
        rules.write(found.group(1))
        rules.flush()
        result = subprocess.run([promtool, "check", "rules", rules.name], capture_output=True,
                                timeout=30)
    check(result.returncode == 0, f"promtool check rules of the alert examples: "
                                  f"{result.stdout.decode()}{result.stderr.decode()}")


def main():
    tests = [test_redis, test_global_limit, test_local, test_redis_down, test_alert_rules]
    failed = 0
    for test in tests:
        try:
            test()
            print(f"ok   {test.__name__}")
        except Failure as e:
            failed += 1
            print(f"FAIL {test.__name__}: {e}")
        sys.stdout.flush()
    print(f"{len(tests) - failed} of {len(tests)} passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
