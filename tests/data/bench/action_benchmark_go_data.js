window.BENCHMARK_DATA = {
  "lastUpdate": 1737388931705,
  "repoUrl": "https://github.com/acme/fibgo",
  "entries": {
    "Benchmark results": [
      {
        "commit": {
          "author": {
            "email": "dev@example.com",
            "name": "dev",
            "username": "dev"
          },
          "committer": {
            "email": "noreply@github.com",
            "name": "GitHub",
            "username": "web-flow"
          },
          "distinct": true,
          "id": "3f1e5c2a9b7d4e6f8a0b1c2d3e4f5a6b7c8d9e0f",
          "message": "fib: first benchmarks",
          "timestamp": "2023-05-02T09:14:51Z",
          "tree_id": "5f0c6f3e9a1d2b4c7e8f9a0b1c2d3e4f5a6b7c8d",
          "url": "https://github.com/acme/fibgo/commit/3f1e5c2a9b7d4e6f8a0b1c2d3e4f5a6b7c8d9e0f"
        },
        "date": 1683018912345,
        "tool": "go",
        "benches": [
          {
            "name": "BenchmarkFib10",
            "value": 331.2,
            "unit": "ns/op",
            "extra": "3612440 times\n2 procs"
          },
          {
            "name": "BenchmarkFib20",
            "value": 41012,
            "unit": "ns/op",
            "extra": "29240 times\n2 procs"
          },
          {
            "name": "BenchmarkFib20WithAuxMetric",
            "value": 41130,
            "unit": "ns/op\t         4.000 auxMetricUnits",
            "extra": "29187 times\n2 procs"
          }
        ]
      },
      {
        "commit": {
          "author": {
            "email": "dev@example.com",
            "name": "dev",
            "username": "dev"
          },
          "committer": {
            "email": "noreply@github.com",
            "name": "GitHub",
            "username": "web-flow"
          },
          "distinct": true,
          "id": "8a2b4c6d8e0f1a3b5c7d9e1f3a5b7c9d1e3f5a7b",
          "message": "bench: keep going",
          "timestamp": "2024-03-07T11:38:59Z",
          "tree_id": "5f0c6f3e9a1d2b4c7e8f9a0b1c2d3e4f5a6b7c8d",
          "url": "https://github.com/acme/fibgo/commit/8a2b4c6d8e0f1a3b5c7d9e1f3a5b7c9d1e3f5a7b"
        },
        "date": 1709811950965,
        "tool": "go",
        "benches": [
          {
            "name": "BenchmarkFib10",
            "value": 310.6,
            "unit": "ns/op",
            "extra": "3870499 times\n4 procs"
          },
          {
            "name": "BenchmarkFib20",
            "value": 39767,
            "unit": "ns/op",
            "extra": "30352 times\n4 procs"
          },
          {
            "name": "BenchmarkFib20WithAuxMetric",
            "value": 39662,
            "unit": "ns/op\t         4.000 auxMetricUnits",
            "extra": "30310 times\n4 procs"
          },
          {
            "name": "BenchmarkFib20WithAuxMetric - ns/op",
            "value": 39662,
            "unit": "ns/op",
            "extra": "30310 times\n4 procs"
          },
          {
            "name": "BenchmarkFib20WithAuxMetric - auxMetricUnits",
            "value": 4,
            "unit": "auxMetricUnits",
            "extra": "30310 times\n4 procs"
          }
        ]
      },
      {
        "commit": {
          "author": {
            "email": "dev@example.com",
            "name": "dev",
            "username": "dev"
          },
          "committer": {
            "email": "noreply@github.com",
            "name": "GitHub",
            "username": "web-flow"
          },
          "distinct": true,
          "id": "c4d6e8f0a2b4c6d8e0f2a4b6c8d0e2f4a6b8c0d2",
          "message": "bench: go 1.23",
          "timestamp": "2025-01-20T16:02:11Z",
          "tree_id": "5f0c6f3e9a1d2b4c7e8f9a0b1c2d3e4f5a6b7c8d",
          "url": "https://github.com/acme/fibgo/commit/c4d6e8f0a2b4c6d8e0f2a4b6c8d0e2f4a6b8c0d2"
        },
        "date": 1737388931118,
        "tool": "go",
        "benches": [
          {
            "name": "BenchmarkFib10",
            "value": 296.4,
            "unit": "ns/op",
            "extra": "4051270 times\n4 procs"
          },
          {
            "name": "BenchmarkFib20",
            "value": 38211,
            "unit": "ns/op",
            "extra": "31402 times\n4 procs"
          },
          {
            "name": "BenchmarkFib20WithAuxMetric - ns/op",
            "value": 38190,
            "unit": "ns/op",
            "extra": "31388 times\n4 procs"
          },
          {
            "name": "BenchmarkFib20WithAuxMetric - auxMetricUnits",
            "value": 4,
            "unit": "auxMetricUnits",
            "extra": "31388 times\n4 procs"
          }
        ]
      }
    ]
  }
}
