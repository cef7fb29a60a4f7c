#!/usr/bin/env python3
"""A scripted model on loopback, so that real coding agents write real transcripts offline.

It answers the Anthropic Messages API (`POST /v1/messages`, streamed or not, and
`/v1/messages/count_tokens`), the OpenAI Chat Completions API (`POST .../chat/completions`)
the OpenAI Responses API (`POST .../responses`) and the Gemini API
(`POST .../models/M:generateContent` and `:streamGenerateContent`), streamed or not, always
with the same short conversation:

- a request that offers a shell tool and holds no tool result yet: a line of text and a call
  of that tool running `echo scripted-tool-output` (or, when it offers transcript-sync's MCP
  search tool, a call of it looking for `scripted-tool-output`);
- a request whose last prompt starts with `Ask a subagent` and that offers a tool to start one
  (Kimi CLI's `Agent`, Nanocoder's `agent`, Aider CE's `Delegate`, OpenHands' `task`, RA.Aid's
  `request_research`, Code Puppy's `invoke_agent`): a line of text and a call of it, handing
  the subagent the scripted prompt;
- a request that holds a tool result: a final text, `Scripted answer: done.` (with a call of
  the `complete` tool, or Aider CE's `Yield`, for an agent that offers one to end its run
  (gptme's `complete`, Cline's `attempt_completion`, RA.Aid's research agent's
  `mark_research_complete_no_implementation_required`), or of its shell running the command
  that ends mini-swe-agent's run, when its prompt names that command);
- Aider's prompt (it offers no tools): the final text;
- any other request (titles, summaries, side questions): a short text, `Scripted title`.

Amp's upload of the thread at the end of a run (`POST /api/internal?uploadThread`) is
acknowledged. Every response carries usage figures (fixed, so fixtures hold known numbers). Each request is
appended to the JSON Lines file named by `--log` (its path and body), so a test can check what
an agent sent, such as the history a resumed session carried.

Usage: model_server.py --port-file FILE [--port N] [--log FILE]. It prints nothing; the port
it listens on is written to FILE once it is listening.
"""

import argparse
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SHELL_TOOLS = ("Bash", "run_shell_command", "bash", "shell", "exec_command", "Execute",
               "execute_command", "run_commands", "terminal", "exec", "Shell", "execute_bash",
               "execute", "local--Command")
TOOL_COMMAND = "echo scripted-tool-output"
# The search tool of transcript-sync's MCP server, as an agent names it (Claude Code:
# mcp__<server>__search), and what it is asked to find.
MCP_SEARCH = "transcript-sync__search"
TOOL_OUTPUT_WORD = "scripted-tool-output"
# What opens the context OpenClaw adds as a user's message after the conversation.
OPENCLAW_CONTEXT = "<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>"
# A subagent's tool, the words that ask for one, and what the subagent is asked.
SUBAGENT_TOOLS = ("Agent", "agent", "local--Delegate", "task", "request_research", "invoke_agent")
SUBAGENT_ASKED = "Ask a subagent"
SUBAGENT_PROMPT = "Run the scripted command, please."
CECLI_INPUT = '<context name="user_input" from="agent">'
# The command mini-swe-agent's prompt tells the model to run to end its task.
SUBMIT_COMMAND = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
# The tool that ends RA.Aid's research, with no implementation to do.
RA_AID_COMPLETE = "mark_research_complete_no_implementation_required"
FIRST_TEXT = "Scripted plan: I will run a command."
FINAL_TEXT = "Scripted answer: done."
OTHER_TEXT = "Scripted title"
USAGE = {"input": 120, "output": 30, "cache_read": 40, "cache_write": 10}

LOG_LOCK = threading.Lock()


def tool_names(body):
    """The names of the tools a request offers, in any of the APIs' shapes."""
    names = []
    for tool in body.get("tools") or []:
        if "functionDeclarations" in tool:
            names.extend(f.get("name") for f in tool["functionDeclarations"])
        elif "function" in tool:
            names.append(tool["function"].get("name"))
        else:
            names.append(tool.get("name"))
    return [n for n in names if n]


def has_tool_result(body):
    """Whether the request's last message holds a tool's result."""
    contents = body.get("contents")
    if isinstance(contents, list) and contents:
        return any("functionResponse" in p for p in contents[-1].get("parts") or [])
    items = body.get("input")
    if isinstance(items, list) and items:
        return items[-1].get("type") in ("function_call_output", "custom_tool_call_output")
    # OpenClaw follows each turn with a user message of its own context: not the person's.
    messages = [m for m in body.get("messages") or [] if not is_openclaw_context(m)]
    if not messages:
        return False
    last = messages[-1]
    if last.get("role") == "tool":
        return True
    content = last.get("content")
    if isinstance(content, list):
        return any(isinstance(b, dict) and b.get("type") == "tool_result" for b in content)
    return False


def is_openclaw_context(message):
    """Whether a message is the context OpenClaw adds after the conversation (its exec
    sessions and subagents), as a user's message of one text block."""
    content = message.get("content")
    if isinstance(content, list) and len(content) == 1 and isinstance(content[0], dict):
        content = content[0].get("text")
    return (message.get("role") == "user" and isinstance(content, str)
            and content.startswith(OPENCLAW_CONTEXT))


def plan(body):
    """What to answer: ("tool", text, tool name) or ("text", text, None)."""
    offered = tool_names(body)
    # transcript-sync's own MCP server, when an agent has it: its search comes first.
    shell = next((t for t in offered if t.endswith(MCP_SEARCH)), None)
    shell = shell or next((t for t in SHELL_TOOLS if t in offered), None)
    subagent = next((t for t in SUBAGENT_TOOLS if t in offered), None)
    if subagent and not has_tool_result(body) and asks_for_subagent(last_prompt(body)):
        return ("tool", FIRST_TEXT, subagent)
    if has_tool_result(body):
        # An agent that runs until told the task is done (gptme) is told so.
        if "complete" in offered:
            return ("tool", FINAL_TEXT, "complete")
        # Cline (2.x) ends a task only with a call of `attempt_completion`.
        if "attempt_completion" in offered:
            return ("tool", FINAL_TEXT, "attempt_completion")
        # Aider CE's agent mode ends a task with a call of its `Yield`.
        if "local--Yield" in offered:
            return ("tool", FINAL_TEXT, "local--Yield")
        # mini-swe-agent ends a run only when its shell runs the command its prompt names.
        if shell and submits_by_command(body):
            return ("tool", FINAL_TEXT, shell)
        # RA.Aid's research agent runs until it is told the research is complete.
        if RA_AID_COMPLETE in offered:
            return ("tool", FINAL_TEXT, RA_AID_COMPLETE)
        return ("text", FINAL_TEXT, None)
    if shell:
        return ("tool", FIRST_TEXT, shell)
    # Aider offers no tools (it asks for file listings and shell commands in the text): its
    # prompt gets the final answer.
    if is_aider(body):
        return ("text", FINAL_TEXT, None)
    return ("text", OTHER_TEXT, None)


def asks_for_subagent(prompt):
    """Whether a prompt asks for a subagent: it starts so, or (RA.Aid's, which frames the
    person's words in its own) holds the words on a line of their own."""
    return prompt.startswith(SUBAGENT_ASKED) or f"\n{SUBAGENT_ASKED}" in prompt


def last_prompt(body):
    """The text of the request's last user message (OpenAI's shape), or ""."""
    users = [m for m in body.get("messages") or [] if m.get("role") == "user"]
    content = users[-1].get("content") if users else None
    if isinstance(content, list):
        content = " ".join(p.get("text") or "" for p in content if isinstance(p, dict))
    if not isinstance(content, str):
        return ""
    # Aider CE sends what the person typed in a context block of its own, after its others.
    if CECLI_INPUT in content:
        content = content.rsplit(CECLI_INPUT, 1)[1].replace("</context>", "").strip()
    return content


def submits_by_command(body):
    """Whether the request's prompt tells the model to end its task by running
    SUBMIT_COMMAND (mini-swe-agent's)."""
    return any(isinstance(m.get("content"), str) and SUBMIT_COMMAND in m["content"]
               for m in body.get("messages") or [] if m.get("role") == "user")


def is_aider(body):
    """Whether the request is Aider's: its system prompt opens with its own words."""
    messages = body.get("messages") or []
    first = messages[0] if messages else {}
    content = first.get("content")
    return (first.get("role") == "system" and isinstance(content, str)
            and content.startswith("Act as an expert software developer."))


def takes(body, name, field):
    """Whether the request's tool `name` has an input field `field` (Anthropic's shape or
    OpenAI's)."""
    for tool in body.get("tools") or []:
        function = tool.get("function") or {}
        if tool.get("name") == name:
            schema = tool.get("input_schema")
        elif function.get("name") == name:
            schema = function.get("parameters")
        else:
            continue
        return field in ((schema or {}).get("properties") or {})
    return False


def takes_argument_list(body, name):
    """Whether the request's tool `name` (OpenAI's Responses shape) takes its `command` as a
    list of arguments."""
    for tool in body.get("tools") or []:
        if tool.get("type") == "function" and tool.get("name") == name:
            properties = (tool.get("parameters") or {}).get("properties") or {}
            return (properties.get("command") or {}).get("type") == "array"
    return False


def tool_input(name, body):
    given = scripted_input(name, body)
    # OpenHands requires every call to rate its own risk.
    if takes(body, name, "security_risk"):
        given["security_risk"] = "LOW"
    return given


def scripted_input(name, body):
    if name in ("complete", "local--Yield"):
        return {}
    # Nanocoder's `agent` has one built-in subagent that is given a task: `explore`.
    if name == "agent":
        return {"description": SUBAGENT_PROMPT, "subagent_type": "explore"}
    # Aider CE's Delegate: its built-in `worker`, waited for.
    if name == "local--Delegate":
        return {"delegations": [{"name": "worker", "prompt": SUBAGENT_PROMPT, "async": False}]}
    # RA.Aid's research agent starts another with `request_research`.
    if name == "request_research":
        return {"query": SUBAGENT_PROMPT}
    # Code Puppy's `invoke_agent` names one of its agents: its default, `code-puppy`.
    if name == "invoke_agent":
        return {"agent_name": "code-puppy", "prompt": SUBAGENT_PROMPT}
    if name in SUBAGENT_TOOLS:
        # Kimi CLI's subagent of that type, or OpenHands' that runs shell commands.
        kind = "bash-runner" if name == "task" else "coder"
        return {"description": "Run the scripted command", "subagent_type": kind,
                "prompt": SUBAGENT_PROMPT}
    if name.endswith(MCP_SEARCH):
        return {"query": TOOL_OUTPUT_WORD, "limit": 3}
    if has_tool_result(body) and submits_by_command(body):
        return {"command": SUBMIT_COMMAND}
    # Amp's Bash takes `cmd` (and a `cwd`); Claude Code's takes `command`.
    if name == "Bash" and takes(body, name, "cmd"):
        return {"cmd": TOOL_COMMAND}
    # Claude Code's Bash, and OpenCode's bash, which before 1.2 requires a description.
    if name == "Bash" or takes(body, name, "description"):
        return {"command": TOOL_COMMAND, "description": "Print a scripted line"}
    if name == "attempt_completion":
        return {"result": FINAL_TEXT}
    if name == RA_AID_COMPLETE:
        return {"message": FINAL_TEXT}
    if name == "execute_command":
        return {"command": TOOL_COMMAND, "requires_approval": False}
    # Open Interpreter's one tool runs code in a language it names.
    if name == "execute":
        return {"language": "shell", "code": TOOL_COMMAND}
    if name == "run_commands":
        return {"commands": [TOOL_COMMAND]}
    if name == "exec_command":
        return {"cmd": TOOL_COMMAND}
    if name == "Execute":
        return {"command": TOOL_COMMAND, "summary": "Print a scripted line",
                "riskLevelReason": "It only prints a line.", "riskLevel": "low"}
    # Codex CLI's TypeScript releases: `shell` takes the command as a list of arguments.
    if takes_argument_list(body, name):
        return {"command": ["bash", "-lc", TOOL_COMMAND]}
    return {"command": TOOL_COMMAND}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    counter = 0

    def log_message(self, *args):
        pass

    def do_GET(self):
        # Model lists, health checks: an empty list is enough for the agents driven here.
        self.send_json(200, {"object": "list", "data": []})

    def do_HEAD(self):
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {}
        self.record(body)
        path = self.path.split("?")[0]
        if path == "/api/internal" and "uploadThread" in self.path:
            # Amp uploads the thread to its server at the end of a run, and exits 1 when
            # that fails.
            self.send_json(200, {"ok": True, "result": {}})
        elif path.endswith("/count_tokens"):
            self.send_json(200, {"input_tokens": USAGE["input"]})
        elif path.endswith("/messages"):
            self.anthropic(body)
        elif path.endswith("/chat/completions"):
            self.openai(body)
        elif path.endswith("/responses"):
            self.openai_responses(body)
        elif ":generateContent" in path or ":streamGenerateContent" in path:
            self.gemini(body, path)
        else:
            self.send_json(404, {"error": {"message": f"no scripted answer for {path}"}})

    def record(self, body):
        log = self.server.log_path
        if not log:
            return
        with LOG_LOCK, open(log, "a", encoding="utf-8") as f:
            f.write(json.dumps({"path": self.path, "body": body}) + "\n")

    def next_id(self, prefix):
        # The port tells one run's ids from another's: an agent that goes on in a session
        # (Mistral Vibe) refuses a tool call whose id its history already holds.
        with LOG_LOCK:
            Handler.counter += 1
            return f"{prefix}_scripted_{self.server.server_port}_{Handler.counter:04d}"

    def send_json(self, status, value):
        data = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def start_stream(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

    def event(self, name, data):
        head = f"event: {name}\n" if name else ""
        self.wfile.write(f"{head}data: {json.dumps(data)}\n\n".encode())
        self.wfile.flush()

    # The Anthropic Messages API.
    def anthropic(self, body):
        kind, text, tool = plan(body)
        model = body.get("model") or "scripted-model"
        blocks = [{"type": "text", "text": text}]
        if kind == "tool":
            blocks.append(
                {"type": "tool_use", "id": self.next_id("toolu"), "name": tool,
                 "input": tool_input(tool, body)}
            )
        stop = "tool_use" if kind == "tool" else "end_turn"
        usage = {
            "input_tokens": USAGE["input"],
            "output_tokens": USAGE["output"],
            "cache_read_input_tokens": USAGE["cache_read"],
            "cache_creation_input_tokens": USAGE["cache_write"],
        }
        message = {"id": self.next_id("msg"), "type": "message", "role": "assistant",
                   "model": model, "content": blocks, "stop_reason": stop,
                   "stop_sequence": None, "usage": usage}
        if not body.get("stream"):
            self.send_json(200, message)
            return
        self.start_stream()
        start = dict(message, content=[], stop_reason=None, usage=dict(usage, output_tokens=1))
        self.event("message_start", {"type": "message_start", "message": start})
        for i, block in enumerate(blocks):
            if block["type"] == "text":
                self.event("content_block_start", {"type": "content_block_start", "index": i,
                                                   "content_block": {"type": "text", "text": ""}})
                self.event("content_block_delta", {"type": "content_block_delta", "index": i,
                                                   "delta": {"type": "text_delta",
                                                             "text": block["text"]}})
            else:
                empty = dict(block, input={})
                self.event("content_block_start", {"type": "content_block_start", "index": i,
                                                   "content_block": empty})
                self.event("content_block_delta", {"type": "content_block_delta", "index": i,
                                                   "delta": {"type": "input_json_delta",
                                                             "partial_json":
                                                                 json.dumps(block["input"])}})
            self.event("content_block_stop", {"type": "content_block_stop", "index": i})
        self.event("message_delta", {"type": "message_delta",
                                     "delta": {"stop_reason": stop, "stop_sequence": None},
                                     "usage": {"output_tokens": USAGE["output"]}})
        self.event("message_stop", {"type": "message_stop"})

    # The OpenAI Responses API.
    def openai_responses(self, body):
        kind, text, tool = plan(body)
        model = body.get("model") or "scripted-model"
        items = [{"type": "message", "id": self.next_id("msg"), "role": "assistant",
                  "status": "completed",
                  "content": [{"type": "output_text", "text": text, "annotations": []}]}]
        if kind == "tool":
            items.append({"type": "function_call", "id": self.next_id("fc"),
                          "call_id": self.next_id("call"), "name": tool,
                          "arguments": json.dumps(tool_input(tool, body)), "status": "completed"})
        usage = {"input_tokens": USAGE["input"] + USAGE["cache_read"],
                 "input_tokens_details": {"cached_tokens": USAGE["cache_read"]},
                 "output_tokens": USAGE["output"],
                 "output_tokens_details": {"reasoning_tokens": 0},
                 "total_tokens": USAGE["input"] + USAGE["cache_read"] + USAGE["output"]}
        response = {"id": self.next_id("resp"), "object": "response", "created_at": 0,
                    "model": model, "status": "completed", "output": items, "usage": usage}
        if not body.get("stream"):
            self.send_json(200, response)
            return
        self.start_stream()
        begun = dict(response, status="in_progress", output=[], usage=None)
        self.event("response.created", {"type": "response.created", "response": begun})
        for i, item in enumerate(items):
            self.event("response.output_item.added",
                       {"type": "response.output_item.added", "output_index": i, "item": item})
            if item["type"] == "message":
                self.event("response.output_text.delta",
                           {"type": "response.output_text.delta", "item_id": item["id"],
                            "output_index": i, "content_index": 0, "delta": text})
            self.event("response.output_item.done",
                       {"type": "response.output_item.done", "output_index": i, "item": item})
        self.event("response.completed", {"type": "response.completed", "response": response})

    # The Gemini API (`models/M:generateContent`, `:streamGenerateContent?alt=sse`).
    def gemini(self, body, path):
        kind, text, tool = plan(body)
        parts = [{"text": text}]
        if kind == "tool":
            parts.append({"functionCall": {"name": tool, "args": tool_input(tool, body)}})
        usage = {"promptTokenCount": USAGE["input"] + USAGE["cache_read"],
                 "cachedContentTokenCount": USAGE["cache_read"],
                 "candidatesTokenCount": USAGE["output"],
                 "totalTokenCount": USAGE["input"] + USAGE["cache_read"] + USAGE["output"]}
        answer = {"candidates": [{"content": {"role": "model", "parts": parts},
                                  "finishReason": "STOP", "index": 0}],
                  "usageMetadata": usage, "modelVersion": "scripted-model",
                  "responseId": self.next_id("gemini")}
        if ":streamGenerateContent" not in path:
            self.send_json(200, answer)
            return
        self.start_stream()
        self.event(None, answer)

    # The OpenAI Chat Completions API.
    def openai(self, body):
        kind, text, tool = plan(body)
        model = body.get("model") or "scripted-model"
        calls = []
        if kind == "tool":
            calls.append({"id": self.next_id("call"), "type": "function",
                          "function": {"name": tool, "arguments": json.dumps(tool_input(tool, body))}})
        finish = "tool_calls" if calls else "stop"
        usage = {"prompt_tokens": USAGE["input"] + USAGE["cache_read"],
                 "completion_tokens": USAGE["output"],
                 "total_tokens": USAGE["input"] + USAGE["cache_read"] + USAGE["output"],
                 "prompt_tokens_details": {"cached_tokens": USAGE["cache_read"]}}
        ident = self.next_id("chatcmpl")
        if not body.get("stream"):
            message = {"role": "assistant", "content": text}
            if calls:
                message["tool_calls"] = calls
            self.send_json(200, {"id": ident, "object": "chat.completion", "created": 0,
                                 "model": model, "usage": usage,
                                 "choices": [{"index": 0, "message": message,
                                              "finish_reason": finish}]})
            return
        self.start_stream()

        def chunk(delta, finish_reason=None, **extra):
            value = {"id": ident, "object": "chat.completion.chunk", "created": 0,
                     "model": model,
                     "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}
            value.update(extra)
            self.event(None, value)

        chunk({"role": "assistant", "content": ""})
        chunk({"content": text})
        for i, call in enumerate(calls):
            chunk({"tool_calls": [dict(call, index=i)]})
        chunk({}, finish)
        self.event(None, {"id": ident, "object": "chat.completion.chunk", "created": 0,
                          "model": model, "choices": [], "usage": usage})
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--port-file", required=True)
    parser.add_argument("--log")
    args = parser.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.log_path = args.log
    with open(args.port_file + ".tmp", "w") as f:
        f.write(str(server.server_address[1]))
    import os
    os.replace(args.port_file + ".tmp", args.port_file)
    server.serve_forever()


if __name__ == "__main__":
    main()
