"""`wisp serve [MODEL] [--host 127.0.0.1] [--port 8000] [--api-key-file FILE] ...`: an OpenAI-compatible server.
Importing this module needs none of the server dependencies; running the command does."""

from __future__ import annotations

import argparse
import os
import sys

from engine.cli.options import add_engine_options, engine_options, read_key_file, size, whole
from engine.errors import WispError

KEY_VARIABLE = "WISP_API_KEY"


def register(commands) -> argparse.ArgumentParser:
    serve = commands.add_parser("serve", help="serve the model over an OpenAI-compatible HTTP API")
    add_engine_options(serve)
    serve.add_argument("--host", default="127.0.0.1",
                       help="address to listen on (default: loopback only; any other needs an API key)")
    serve.add_argument("--port", type=whole(0, 65535), default=8000, help="TCP port, 0 picks a free one")
    keys = serve.add_mutually_exclusive_group()
    keys.add_argument("--api-key", default=None,
                      help=f"key clients must send as 'Authorization: Bearer KEY' (default: ${KEY_VARIABLE}); "
                           "visible to other users in `ps`, so prefer the variable or --api-key-file")
    keys.add_argument("--api-key-file", default=None, help="read the key from the first line of this file")
    serve.add_argument("--served-model-name", default=None, help="the model id clients use (default: derived)")
    serve.add_argument("--max-tokens-limit", type=whole(1, 2**31 - 1), default=4096,
                       help="most tokens one request may generate")
    serve.add_argument("--max-concurrent-requests", type=whole(1, 1_000_000), default=64,
                       help="requests in flight before new ones get 429")
    serve.add_argument("--max-body-size", type=size, default=4 * 1024**2,
                       help="largest request body (413 beyond); images come in it as base64: raise it for large ones")
    serve.add_argument("--allow-image-urls", action="store_true",
                       help="fetch http(s) image_url parts (20 MB, 10 s each); otherwise only data URLs are taken")
    serve.add_argument("--cors", action="append", default=[], metavar="ORIGIN",
                       help="let web pages of ORIGIN (e.g. http://localhost:3000) call the server from a browser; "
                            "repeat for more (default: none)")
    serve.add_argument("--max-num-seqs", type=whole(1, 4096), default=8, help="sequences batched together in the engine")
    serve.set_defaults(handler=serve_command)
    return serve


def api_key(args: argparse.Namespace) -> str | None:
    """--api-key, else the first line of --api-key-file, else $WISP_API_KEY."""
    if args.api_key_file:
        return read_key_file(args.api_key_file)
    return args.api_key or os.environ.get(KEY_VARIABLE) or None


def serve_command(args: argparse.Namespace) -> int:
    from engine.server.limits import ServerLimits, check_bind

    key = api_key(args)
    check_bind(args.host, key)  # before loading anything large
    limits = ServerLimits(max_body_bytes=args.max_body_size, max_tokens=args.max_tokens_limit,
                          max_concurrent_requests=args.max_concurrent_requests, cors_origins=tuple(args.cors),
                          allow_image_urls=args.allow_image_urls)
    options = engine_options(args)
    try:
        from engine.server.runner import bind_socket, serve_forever, server_url
    except ImportError as error:
        raise WispError(f"`wisp serve` needs the server dependencies ({error.name} is missing): "
                        "pip install 'wisp[server]'") from None
    from dataclasses import replace

    from engine.api import Engine
    from engine.server.served_model import served_model_id

    sock = bind_socket(args.host, args.port)
    with sock, Engine(replace(options, max_num_seqs=args.max_num_seqs)) as engine:
        model_id = args.served_model_name or served_model_id(engine.info)
        url = server_url(args.host, sock.getsockname()[1])
        print(f"Serving {engine.info.name} as model '{model_id}' at {url} (Ollama's API at {url.removesuffix('/v1')})"
              f"{' (API key required)' if key else ''}. Ctrl+C stops.", file=sys.stderr)
        serve_forever(engine, sock, key, limits, model_id)
    return 0
