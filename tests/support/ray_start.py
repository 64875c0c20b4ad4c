"""`ray start` for the tests' Ray cluster, with a longer wait for the node to register.

Ray's `ray start` gives the node a fixed 30 s to register (and its raylet 30 s to find its
agents, `RAY_raylet_start_wait_time_s`). On a machine whose CPU is shared by many processes
the node's Python agents alone can take longer than that to import, and `ray start` then
fails although the node would come up. This launcher runs Ray's own command line unchanged
except that the registration check keeps asking up to `NODE_REGISTER_SECONDS`.

    python -m tests.support.ray_start start --head ...
"""

from __future__ import annotations

import time
from typing import Any

NODE_REGISTER_SECONDS = 240.0


def main() -> None:
    import ray._private.services as services
    import ray._private.utils as utils
    from ray.scripts.scripts import main as ray_main

    # the node's agent without its optional modules (metrics, job submission): it starts
    # in a fraction of the time, and the tests need neither
    utils.get_dashboard_dependency_error = lambda: "the tests' node runs the minimal agent"
    get_node = services.get_node

    def patient_get_node(*args: Any, **kwargs: Any) -> Any:
        deadline = time.monotonic() + NODE_REGISTER_SECONDS
        while True:
            try:
                return get_node(*args, **kwargs)
            except RuntimeError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    services.get_node = patient_get_node
    ray_main()


if __name__ == "__main__":
    main()
