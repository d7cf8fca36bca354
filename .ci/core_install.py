"""CI: the core install of rocketkafka (no extras) in a fresh venv.

Checks, each failing the step when it does not hold:
  1. `pip install <repo>` with no extras succeeds and the venv stays under 150 MB (printed);
  2. the only top-level module it installs is `rocketkafka` (no generic names such as `spark`);
  3. the client API imports, and a door that needs an extra says which one;
  4. a produce/consume round trip works against an embedded stack started by *this* interpreter
     (the dev venv, which has the [embedded] extra): both doors, an orderly PushConsumer.

Run with the dev venv's python: `.venv/bin/python .ci/core_install.py`.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import textwrap
import venv
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LIMIT_MB = 150

SMOKE = textwrap.dedent('''
    import sys, uuid
    from rocketkafka import Message, Producer, PushConsumer, Settings, TopicAdmin
    from rocketkafka.kafka import Consumer, Producer as KafkaProducer
    from rocketkafka.testing import wait_for
    settings = Settings(bootstrap_servers=sys.argv[1], redis_urls=sys.argv[2].split(","))
    topic = "core-" + uuid.uuid4().hex[:6]
    TopicAdmin(settings).create(topic, partitions=2)
    with Producer("core", settings=settings) as producer:
        ids = [producer.send_orderly(Message(topic, body=b"m%d" % i, tags="t"), sharding_key=str(i % 4)).msg_id
               for i in range(50)]
    seen = []
    consumer = PushConsumer("core-" + uuid.uuid4().hex[:6], settings=settings, orderly=True,
                            consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    consumer.subscribe(topic, lambda msg: seen.append(msg.id), expression="t")
    with consumer:
        assert wait_for(lambda: len(seen) >= 50, 60), f"PushConsumer saw {len(seen)} of 50"
    assert sorted(seen) == sorted(ids), "PushConsumer saw other ids than were sent"
    dropin = KafkaProducer({"bootstrap.servers": settings.bootstrap_servers})
    dropin.produce(topic, b"plain", key=b"k")
    assert dropin.flush(30) == 0
    reader = Consumer({"bootstrap.servers": settings.bootstrap_servers, "group.id": "core-" + uuid.uuid4().hex[:6],
                       "auto.offset.reset": "earliest", "rocketkafka.redis.urls": ",".join(settings.redis_urls)})
    reader.subscribe([topic])
    got = []
    while len(got) < 51 and wait_for(lambda: (m := reader.poll(0.5)) is not None and not got.append(m), 30):
        pass
    reader.close()
    assert len(got) == 51, f"drop-in Consumer read {len(got)} of 51"
    print("round trip ok: 50 orderly + 51 drop-in")
''')

MISSING_EXTRA = textwrap.dedent('''
    from rocketkafka.extras import MissingExtraError
    try:
        import rocketkafka.spark
    except MissingExtraError as exc:
        assert exc.extra == "spark" and "rocketkafka[spark]" in str(exc), exc
        print("rocketkafka.spark:", exc)
    else:
        raise SystemExit("rocketkafka.spark imported without the [spark] extra")
''')


def run(*argv: str, cwd: str, **kw) -> subprocess.CompletedProcess:
    """Run outside the checkout: from its root, ``-c`` code would see the editable install's egg-info."""
    print("$", " ".join(argv), flush=True)
    return subprocess.run(argv, check=True, text=True, cwd=cwd, **kw)


def size_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink()) / 1e6


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="rk-core-") as tmp:
        env_dir = Path(tmp) / "venv"
        venv.create(env_dir, with_pip=True)
        python = str(env_dir / "bin" / "python")
        run(python, "-m", "pip", "install", "-q", "--disable-pip-version-check", str(REPO), cwd=tmp)
        mb = size_mb(env_dir)
        print(f"core install: venv {mb:.1f} MB (limit {LIMIT_MB} MB)")
        if mb >= LIMIT_MB:
            raise SystemExit(f"the core install is {mb:.1f} MB, over {LIMIT_MB} MB")

        listing = run(python, "-c", "import importlib.metadata as m, json; d = m.distribution('rocketkafka'); "
                      "print(json.dumps(sorted({str(f).split('/')[0] for f in d.files})))", cwd=tmp, capture_output=True).stdout
        tops = {t.removesuffix(".py") for t in json.loads(listing) if not t.endswith(".dist-info") and t != ".."}
        print("top-level names installed:", sorted(tops))
        if tops != {"rocketkafka"}:
            raise SystemExit(f"the core install puts other top-level names on sys.path: {sorted(tops - {'rocketkafka'})}")

        run(python, "-c", MISSING_EXTRA, cwd=tmp)
        from rocketkafka.testing import DevStack  # the dev venv's embedded extra serves the broker

        with DevStack(redis_nodes=3) as stack:
            run(python, "-c", SMOKE, stack.bootstrap_servers, ",".join(stack.redis_urls), cwd=tmp)


if __name__ == "__main__":
    sys.exit(main())
