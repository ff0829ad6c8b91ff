"""The main window's actions with their shortcuts (Ctrl+Enter send, Esc stop, Ctrl+N new chat, ...), and the
menus and tool bar that show them."""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtGui import QAction, QActionGroup, QKeySequence
from PySide6.QtWidgets import QMainWindow, QToolBar

from app.icons import icon


@dataclass(frozen=True)
class WindowActions:
    new_chat: QAction
    send: QAction
    stop: QAction
    choose_model: QAction
    open_model_folder: QAction
    repeatable: QAction
    host_memory: QAction
    dense_q8_0: QAction
    drafts_off: QAction
    drafts_ngram: QAction
    drafts_mtp: QAction
    drafts_auto: QAction
    gguf_auto: QAction
    gguf_wisp: QAction
    gguf_llama_cpp: QAction
    chat_mode: QAction
    code_mode: QAction
    theme_system: QAction
    theme_light: QAction
    theme_dark: QAction
    mcp_servers: QAction
    open_logs: QAction
    quit: QAction

    @property
    def themes(self) -> dict[str, QAction]:
        return {"system": self.theme_system, "light": self.theme_light, "dark": self.theme_dark}

    @property
    def drafts(self) -> dict[str, QAction]:
        """The Model → Draft tokens choices, keyed by app.speculation_choice.SPECULATIVE_CHOICES."""
        return {"off": self.drafts_off, "ngram": self.drafts_ngram, "mtp": self.drafts_mtp, "auto": self.drafts_auto}

    @property
    def gguf_engines(self) -> dict[str, QAction]:
        """The Model → GGUF engine choices, keyed by app.settings.GGUF_ENGINES."""
        return {"auto": self.gguf_auto, "wisp": self.gguf_wisp, "llama.cpp": self.gguf_llama_cpp}


MTP_TIP = ("Speculative decoding with the model's own multi-token-prediction layers (Qwen3.5, Qwen3-Next, GLM-4.5, "
           "DeepSeek-V3 checkpoints): they draft the next tokens and one step checks them (the reply is exactly "
           "the same); loads the layers, so it reloads the model")
NO_MTP_TIP = "The loaded model has no draft (MTP) layers Wisp runs: choose the conversation (n-gram) or Auto"


def _action(window: QMainWindow, text: str, shortcut=None, icon_name: str | None = None, tip: str = "") -> QAction:
    action = QAction(text, window)
    if icon_name:
        action.setIcon(icon(icon_name))
    if shortcut is not None:
        shortcuts = shortcut if isinstance(shortcut, list) else [shortcut]
        action.setShortcuts([QKeySequence(s) for s in shortcuts])
    action.setToolTip(tip or text.replace("&", "").rstrip("…"))
    window.addAction(action)  # shortcuts work even while the menu bar is hidden
    return action


def create_actions(window: QMainWindow) -> WindowActions:
    actions = WindowActions(
        new_chat=_action(window, "&New chat", QKeySequence.StandardKey.New, "new-chat", "New chat (Ctrl+N)"),
        send=_action(window, "&Send", ["Ctrl+Return", "Ctrl+Enter"], "send", "Send (Ctrl+Enter)"),
        stop=_action(window, "S&top", "Esc", "stop", "Stop generating (Esc)"),
        choose_model=_action(window, "&Choose model…", "Ctrl+M", "model", "Choose a model (Ctrl+M)"),
        open_model_folder=_action(window, "&Open model folder…", QKeySequence.StandardKey.Open),
        repeatable=_action(window, "&Repeatable outputs", tip="The same prompt gives the same reply, bit for bit "
                           "(deterministic GPU kernels, as fast as the others on an H200); reloads the model"),
        host_memory=_action(window, "&Host memory for experts…", tip="The most host RAM pinned for experts that are "
                            "not on the GPU (the rest are read from the model file); reloads the model"),
        dense_q8_0=_action(window, "&Q8_0 dense weights (smaller, changes outputs)",
                           tip="Checkpoint folders: attention, shared experts, dense layers, lm_head and the embedding "
                           "quantized to Q8_0 at load (about half of bf16's memory, left for experts and context); "
                           "the replies change by the rounding. GGUF files keep their own types; reloads the model"),
        drafts_off=_action(window, "&Off", tip="One token a step"),
        drafts_ngram=_action(window, "From the &conversation (n-gram)",
                             tip="Speculative decoding by prompt lookup: the model checks several tokens copied from "
                             "the prompt and the reply so far in one step (faster where replies repeat code or text "
                             "you sent; the reply is exactly the same). Wisp's engine only; the memory panel shows "
                             "how many drafts were accepted"),
        drafts_mtp=_action(window, "From the model's &draft layers (MTP)", tip=MTP_TIP),
        drafts_auto=_action(window, "&Auto", tip="The model's draft layers where it has them, else the conversation; "
                            "reloads a model that has draft layers"),
        gguf_auto=_action(window, "&Auto", tip="GGUF files run on Wisp's engine (experts paged) when it supports "
                          "the file's architecture and quant types, on llama.cpp otherwise; reloads a GGUF model"),
        gguf_wisp=_action(window, "&Wisp's engine", tip="GGUF files run on Wisp's engine, experts paged within the "
                          "budget (a file it does not support is refused); reloads a GGUF model"),
        gguf_llama_cpp=_action(window, "&llama.cpp", tip="GGUF files run on llama.cpp, which places the model "
                               "itself (the budget does not apply); reloads a GGUF model"),
        chat_mode=_action(window, "&Chat", "Ctrl+1", "chat", "Chat mode (Ctrl+1)"),
        code_mode=_action(window, "C&ode assistant", "Ctrl+2", "code", "Coding-assistant mode (Ctrl+2)"),
        theme_system=_action(window, "Follow the &system"),
        theme_light=_action(window, "&Light"),
        theme_dark=_action(window, "&Dark"),
        mcp_servers=_action(window, "&MCP servers…", tip="The MCP servers whose tools the model may call (each call is "
                            "shown in the chat, and asked before it runs unless you allowed the server)"),
        open_logs=_action(window, "Open &logs", None, "logs"),
        quit=_action(window, "&Quit", QKeySequence.StandardKey.Quit),
    )
    for group_members in ((actions.chat_mode, actions.code_mode), tuple(actions.themes.values()),
                          tuple(actions.gguf_engines.values()), tuple(actions.drafts.values())):
        group = QActionGroup(window)
        for action in group_members:
            action.setCheckable(True)
            group.addAction(action)
    actions.repeatable.setCheckable(True)
    actions.dense_q8_0.setCheckable(True)
    return actions


def build_menus(window: QMainWindow, actions: WindowActions) -> None:
    bar = window.menuBar()
    file_menu = bar.addMenu("&File")
    for action in (actions.new_chat, actions.send, actions.stop):
        file_menu.addAction(action)
    file_menu.addSeparator()
    file_menu.addAction(actions.quit)
    model_menu = bar.addMenu("&Model")
    model_menu.addAction(actions.choose_model)
    model_menu.addAction(actions.open_model_folder)
    model_menu.addSeparator()
    model_menu.addAction(actions.repeatable)
    model_menu.addAction(actions.host_memory)
    model_menu.addAction(actions.dense_q8_0)
    drafts_menu = model_menu.addMenu("&Draft tokens")
    drafts_menu.setToolTipsVisible(True)
    for action in actions.drafts.values():
        drafts_menu.addAction(action)
    gguf_menu = model_menu.addMenu("&GGUF engine")
    for action in actions.gguf_engines.values():
        gguf_menu.addAction(action)
    view_menu = bar.addMenu("&View")
    view_menu.addAction(actions.chat_mode)
    view_menu.addAction(actions.code_mode)
    theme_menu = view_menu.addMenu("&Theme")
    for action in actions.themes.values():
        theme_menu.addAction(action)
    settings_menu = bar.addMenu("&Settings")
    settings_menu.addAction(actions.mcp_servers)
    help_menu = bar.addMenu("&Help")
    help_menu.addAction(actions.open_logs)


def build_tool_bar(window: QMainWindow, actions: WindowActions) -> QToolBar:
    bar = window.addToolBar("Main")
    bar.setObjectName("mainToolBar")
    bar.setMovable(False)
    bar.setToolButtonStyle(bar.toolButtonStyle().ToolButtonTextBesideIcon)
    for action in (actions.new_chat, actions.choose_model):
        bar.addAction(action)
    bar.addSeparator()
    bar.addAction(actions.chat_mode)
    bar.addAction(actions.code_mode)
    return bar
