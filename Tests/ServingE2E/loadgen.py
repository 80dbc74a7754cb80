"""A closed-loop load generator for `modelc serve`: N client threads, each with one keep-alive
connection, sending inference requests back to back for a time; latencies and statuses recorded."""
import http.client
import json
import threading
import time


def percentile(sorted_values, fraction):
    if not sorted_values:
        return 0.0
    index = min(len(sorted_values) - 1, max(0, round(fraction * (len(sorted_values) - 1))))
    return sorted_values[index]


def run(port, requests, clients, seconds, timeout=60):
    """requests: a list of (path, body bytes); client i starts at request i and goes round them.
    Returns a summary dict: count, failures (non-200 answers and connection errors), p50_ms,
    p99_ms, throughput (answers per second), statuses."""
    latencies, statuses, errors = [], {}, []
    lock = threading.Lock()
    deadline = time.monotonic() + seconds

    def client(index):
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        position = index
        mine, my_statuses = [], {}
        while time.monotonic() < deadline:
            path, body = requests[position % len(requests)]
            position += 1
            started = time.monotonic()
            try:
                connection.request("POST", path, body, {"Content-Type": "application/json"})
                response = connection.getresponse()
                response.read()
            except (OSError, http.client.HTTPException) as error:
                with lock:
                    errors.append(repr(error))
                connection.close()
                connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
                continue
            mine.append(time.monotonic() - started)
            my_statuses[response.status] = my_statuses.get(response.status, 0) + 1
        connection.close()
        with lock:
            latencies.extend(mine)
            for status, count in my_statuses.items():
                statuses[status] = statuses.get(status, 0) + count

    started = time.monotonic()
    threads = [threading.Thread(target=client, args=(index,)) for index in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - started
    latencies.sort()
    failures = sum(count for status, count in statuses.items() if status != 200) + len(errors)
    return {"count": len(latencies), "failures": failures, "errors": errors[:5], "statuses": statuses,
            "p50_ms": percentile(latencies, 0.5) * 1000, "p99_ms": percentile(latencies, 0.99) * 1000,
            "throughput": len(latencies) / elapsed}


IRIS = json.dumps({"inputs": [{"name": "features", "datatype": "FP64", "shape": [4], "data": [5.1, 3.5, 1.4, 0.2]}]}).encode()
PROGRAM = json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 16], "data": list(range(16))}]}).encode()
FIXTURE_REQUESTS = {
    "TreeEnsembleClassifier": IRIS,
    "GLMClassifier": IRIS,
    "MLProgram": PROGRAM,
    "KNNClassifier": json.dumps({"inputs": [{"name": "features", "datatype": "FP32", "shape": [2], "data": [0.5, 1.5]}]}).encode(),
    "SVMClassifier": json.dumps({"inputs": [{"name": "features", "datatype": "FP64", "shape": [2], "data": [0.5, 1.5]}]}).encode(),
}


def fixture_requests(names):
    return [(f"/v2/models/{name}/infer", FIXTURE_REQUESTS[name]) for name in names]
