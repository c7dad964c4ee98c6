"""chunlian on Ray Serve: the same HTTP API (page, /api/v1/*, /metrics, /healthz, /readyz) from replicas of the
warmed engine, behind Ray Serve's proxy.

    pip install -e ".[ray]"
    python -m chunlian.deploy.ray_serve --port 8000                   # autoscaling 1..4 replicas
    python -m chunlian.deploy.ray_serve --port 8000 --replicas 2      # a fixed number

Each replica is the app of ``chunlian.server.create_app`` around its own ``Engine(batching=True)``, mounted with
``@serve.ingress``, so every route, refusal and header is the one `chunlian serve` gives. Batching is the engine's own
dynamic batcher, not ``@serve.batch``: ``@serve.batch`` gathers whole calls and hands them to one function, but a
couplet is a beam search of many model steps whose requests join and leave at every step (continuous batching, and
one request's candidates are rows of the same call); the engine's batcher merges those step by step, which a
call-level batch cannot. Ray Serve adds replicas (processes, or machines in a cluster) and routes requests among
them; settings come from CHUNLIAN_* variables as for `chunlian serve`, and CHUNLIAN_REDIS_URL lets the replicas
share one result cache. Each replica's /metrics covers that replica only (Ray's own metrics cover the proxy).
"""

from __future__ import annotations

import argparse
import signal
import threading

from ray import serve

from chunlian.engine import Engine, Settings

# requests in flight per replica before the autoscaler adds one: the batcher decodes max_concurrency (8) at once
AUTOSCALING = {
    "min_replicas": 1,
    "max_replicas": 4,
    "target_ongoing_requests": 8,
    "upscale_delay_s": 10,
    "downscale_delay_s": 120,
}


@serve.ingress()  # the app is built in each replica, around that replica's engine
class Chunlian:
    def __init__(self, settings: dict | None = None):
        self.settings = Settings(**(settings or {}))
        # the model loads and warms here: Serve marks a replica RUNNING (and routes to it) only once the
        # constructor returns, so no request meets a replica still warming (503 not_ready)
        self.engine = Engine(settings=self.settings, batching=True)
        if self.settings.warm:
            self.engine.warm()

    def __serve_build_asgi_app__(self):
        from chunlian.server import create_app

        # warmed already: the app's lifespan only turns /readyz to 200
        return create_app(engine=self.engine, settings=self.settings.model_copy(update={"warm": False}))

    def check_health(self):  # Serve restarts a replica whose batch worker has died
        alive = getattr(self.engine, "alive", None)
        if alive is not None and not alive():
            raise RuntimeError("the batch worker has stopped")

    def __del__(self):
        engine = getattr(self, "engine", None)
        if engine is not None:
            engine.close()


def build(num_replicas: int | None = None, settings: dict | None = None, num_cpus: float = 1):
    """The application for ``serve.run``: ``num_replicas`` fixed, or autoscaled (AUTOSCALING) when None.
    ``settings`` override the CHUNLIAN_* environment, as flags do for `chunlian serve`. A replica runs as many batch
    workers as the CPUs it is given (one per core of its host would oversubscribe them), unless ``settings`` say."""
    settings = {"workers": max(1, int(num_cpus))} | (settings or {})
    limit = Settings(**settings)
    dep = serve.deployment(
        Chunlian,
        name="chunlian",
        num_replicas=num_replicas or "auto",
        autoscaling_config=None if num_replicas else AUTOSCALING,
        # beyond the engine's own admission limit the engine answers 503 itself
        max_ongoing_requests=limit.max_concurrency + limit.queue_size,
        ray_actor_options={"num_cpus": num_cpus},
        health_check_period_s=5,
    )
    return dep.bind(settings)


def main(argv: list[str] | None = None) -> int:
    import ray

    ap = argparse.ArgumentParser(prog="python -m chunlian.deploy.ray_serve", description=__doc__.split("\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--replicas", type=int, default=None, help="a fixed number (default: autoscale 1..4)")
    ap.add_argument("--address", default=None, help="a running Ray cluster (default: start a local one)")
    args = ap.parse_args(argv)
    ray.init(address=args.address, include_dashboard=False)
    serve.start(http_options={"host": args.host, "port": args.port})
    serve.run(build(args.replicas), name="chunlian", route_prefix="/")
    print(f"chunlian on Ray Serve at http://{args.host}:{args.port}", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        stop.wait()
    except KeyboardInterrupt:
        pass
    serve.shutdown()
    ray.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
