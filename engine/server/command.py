"""`wisp serve [MODEL] [--host 127.0.0.1] [--port 8000] [--api-key KEY] ...`: an OpenAI-compatible server.
Importing this module needs none of the server dependencies; running the command does."""

from __future__ import annotations

import argparse
import os
import sys

from engine.errors import WispError


def add_parser(commands) -> argparse.ArgumentParser:
    from engine.cli import add_engine_options

    serve = commands.add_parser("serve", help="serve the model over an OpenAI-compatible HTTP API")
    add_engine_options(serve)
    serve.add_argument("--host", default="127.0.0.1",
                       help="address to listen on (default: loopback only; any other needs --api-key)")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--api-key", default=os.environ.get("WISP_API_KEY"),
                       help="key clients must send as 'Authorization: Bearer KEY' (default: $WISP_API_KEY)")
    serve.add_argument("--served-model-name", default=None, help="the model id clients use (default: derived)")
    serve.add_argument("--max-tokens-limit", type=int, default=4096, help="most tokens one request may generate")
    serve.add_argument("--max-concurrent-requests", type=int, default=64,
                       help="requests in flight before new ones get 429")
    serve.add_argument("--max-body-size", default="4MiB", help="largest request body (413 beyond)")
    serve.add_argument("--max-num-seqs", type=int, default=8, help="sequences batched together in the engine")
    serve.set_defaults(handler=serve_command)
    return serve


def serve_command(args: argparse.Namespace) -> int:
    from engine.server.limits import ServerLimits, check_bind
    from engine.units import parse_size

    check_bind(args.host, args.api_key)  # before loading anything large
    limits = ServerLimits(max_body_bytes=parse_size(args.max_body_size), max_tokens=args.max_tokens_limit,
                          max_concurrent_requests=args.max_concurrent_requests)
    try:
        from engine.server.runner import bind_socket, serve_forever, server_url
    except ImportError as error:
        raise WispError(f"`wisp serve` needs the server dependencies ({error.name} is missing): "
                        "pip install 'wisp[server]'") from None
    from dataclasses import replace

    from engine.api import Engine
    from engine.cli_commands import engine_options
    from engine.server.served_model import served_model_id

    sock = bind_socket(args.host, args.port)
    with sock, Engine(replace(engine_options(args), max_num_seqs=args.max_num_seqs)) as engine:
        model_id = args.served_model_name or served_model_id(engine.info)
        print(f"Serving {engine.info.name} as model '{model_id}' at {server_url(args.host, sock.getsockname()[1])}"
              f"{' (API key required)' if args.api_key else ''}. Ctrl+C stops.", file=sys.stderr)
        serve_forever(engine, sock, args.api_key, limits, model_id)
    return 0
