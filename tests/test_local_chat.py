"""The embedded server's chat format: tool results become user turns the model can read (no model needed)."""

from trek.local import CHAT_FORMAT, LocalServer, show_tool_results


def test_tool_results_are_shown_as_user_turns_naming_the_tool():
    call = {"id": "call_1", "type": "function", "function": {"name": "web_search", "arguments": '{"query": "q"}'}}
    messages = [{"role": "system", "content": "tools"}, {"role": "user", "content": "Who?"},
                {"role": "assistant", "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "call_1", "content": "[1] Dana Okafor named coach"},
                {"role": "tool", "tool_call_id": "call_9", "content": None}]
    shown = show_tool_results(messages)
    assert shown[:2] == messages[:2]
    assert shown[2] == {"role": "assistant", "content": "", "tool_calls": [call]}  # a text, empty
    assert shown[3] == {"role": "user", "content": "Result of web_search:\n[1] Dana Okafor named coach"}
    assert shown[4] == {"role": "user", "content": "Result of the tool:\n"}
    assert "content" not in messages[2]  # the caller's messages are left alone


def test_the_server_is_started_through_trek_local_with_that_chat_format(monkeypatch, tmp_path):
    import trek.local

    monkeypatch.setattr(trek.local, "find_model_file", lambda: tmp_path / "model.gguf")
    cmd = LocalServer(port=1).command()
    assert cmd[1:3] == ["-m", "trek.local"]
    assert cmd[cmd.index("--chat_format") + 1] == CHAT_FORMAT == "trek-chatml-tools"
    assert cmd[cmd.index("--model") + 1] == str(tmp_path / "model.gguf")
