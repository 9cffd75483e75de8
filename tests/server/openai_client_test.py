#!/usr/bin/env python3
"""The official `openai` Python client against a real `llmrun serve`.

Usage: openai_client_test.py LLMC LLMRUN SOURCE_DIR
Builds the default model, starts the server on 127.0.0.1 and a free port,
checks completions (plain, streamed, with usage), models, errors and, when
the server has a chat template, chat; then stops the server with SIGTERM.
Prints "[  SKIPPED ]" and exits 0 when the openai package is missing.
"""
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

try:
    import openai
except ImportError:
    print("[  SKIPPED ] the openai Python package is not installed (pip install openai)")
    sys.exit(0)

LLMC, LLMRUN, SOURCE = sys.argv[1:4]


def check(condition, message):
    if not condition:
        print("FAILED: " + message)
        sys.exit(1)


def main():
    with tempfile.TemporaryDirectory() as scratch:
        plan = os.path.join(scratch, "tiny.plan")
        subprocess.run([LLMC, "build", os.path.join(SOURCE, "scripts/default-model/model.json"),
                        "--synthetic-weights", "--target", "cpu", "-o", plan],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        server = subprocess.Popen(
            [LLMRUN, "serve", plan, "--port", "0", "--threads", "1", "--served-model-name", "tiny",
             "--api-key", "k3y", "--chat-template",
             os.path.join(SOURCE, "tests/server/data/chat.jinja")],
            stderr=subprocess.PIPE, text=True)
        try:
            port = None
            log = ""
            deadline = time.time() + 60
            while port is None and time.time() < deadline:
                line = server.stderr.readline()
                if not line:
                    break
                log += line
                found = re.search(r"on http://127\.0\.0\.1:(\d+)", line)
                if found:
                    port = int(found.group(1))
            check(port is not None, "the server did not start:\n" + log)
            run_checks(port)
        finally:
            server.send_signal(signal.SIGTERM)
            try:
                code = server.wait(timeout=15)
            except subprocess.TimeoutExpired:
                server.kill()
                code = None
        check(code == 0, "llmrun serve exited with %r after SIGTERM" % code)
    print("openai client test: all checks passed")


def run_checks(port):
    client = openai.OpenAI(base_url="http://127.0.0.1:%d/v1" % port, api_key="k3y", max_retries=0)

    models = client.models.list()
    check([m.id for m in models.data] == ["tiny"], "models: %r" % models)

    plain = client.completions.create(model="tiny", prompt="Once upon a time", max_tokens=8,
                                      temperature=0, extra_body={"ignore_eos": True})
    check(plain.object == "text_completion", "object: %r" % plain.object)
    check(plain.usage.completion_tokens == 8, "usage: %r" % plain.usage)
    check(plain.choices[0].finish_reason == "length", "finish: %r" % plain.choices[0])

    pieces = []
    usage = None
    for chunk in client.completions.create(model="tiny", prompt="Once upon a time", max_tokens=8,
                                           temperature=0, stream=True,
                                           stream_options={"include_usage": True},
                                           extra_body={"ignore_eos": True}):
        if chunk.choices:
            pieces.append(chunk.choices[0].text)
        if chunk.usage is not None:
            usage = chunk.usage
    check("".join(pieces) == plain.choices[0].text,
          "streamed %r != %r" % ("".join(pieces), plain.choices[0].text))
    check(usage is not None and usage.completion_tokens == 8, "stream usage: %r" % usage)

    # echo with logprobs (the scoring call): the prompt's tokens lead, the first with None.
    scored = client.completions.create(model="tiny", prompt="Once upon a time", max_tokens=2,
                                       temperature=0, echo=True, logprobs=1,
                                       extra_body={"ignore_eos": True})
    lp = scored.choices[0].logprobs
    check(scored.choices[0].text.startswith("Once upon a time"), "echo: %r" % scored.choices[0])
    check(lp.token_logprobs[0] is None and lp.top_logprobs[0] is None, "first: %r" % lp)
    check(len(lp.tokens) >= 4 and all(v <= 0 for v in lp.token_logprobs[1:]), "scores: %r" % lp)

    try:
        client.completions.create(model="tiny", prompt="x", temperature=5)
        check(False, "temperature 5 was accepted")
    except openai.BadRequestError as e:
        check(e.status_code == 400, "status %r" % e.status_code)
        check("temperature" in str(e), "message: %s" % e)
    try:
        client.completions.create(model="other", prompt="x")
        check(False, "an unknown model was accepted")
    except openai.NotFoundError as e:
        check(e.status_code == 404, "status %r" % e.status_code)
    try:
        openai.OpenAI(base_url="http://127.0.0.1:%d/v1" % port, api_key="wrong",
                      max_retries=0).completions.create(model="tiny", prompt="x")
        check(False, "a wrong key was accepted")
    except openai.AuthenticationError as e:
        check(e.status_code == 401, "status %r" % e.status_code)

    try:
        chat = client.chat.completions.create(
            model="tiny", messages=[{"role": "user", "content": "Hello"}], max_tokens=6,
            temperature=0, extra_body={"ignore_eos": True})
    except openai.BadRequestError as e:
        check("chat" in str(e), "chat error: %s" % e)
        print("chat: not available in this build (%s)" % e)
        return
    check(chat.object == "chat.completion", "chat object: %r" % chat.object)
    check(chat.choices[0].message.role == "assistant", "role: %r" % chat.choices[0].message)
    streamed = "".join(c.choices[0].delta.content or "" for c in client.chat.completions.create(
        model="tiny", messages=[{"role": "user", "content": "Hello"}], max_tokens=6,
        temperature=0, stream=True, extra_body={"ignore_eos": True}) if c.choices)
    check(streamed == chat.choices[0].message.content,
          "chat streamed %r != %r" % (streamed, chat.choices[0].message.content))


if __name__ == "__main__":
    main()
