"""The main window: builds the parts and connects them. Behaviour lives in the parts."""

from __future__ import annotations

from dataclasses import replace

from PySide6.QtCore import QTimer, QUrl, Qt, Slot
from PySide6.QtGui import QDesktopServices, QGuiApplication
from PySide6.QtWidgets import QFileDialog, QMainWindow, QScrollArea, QSplitter, QVBoxLayout, QWidget

from app.app_paths import AppPaths
from app.background import run_in_background, wait_for_background_tasks
from app.chat.chat_widget import ChatWidget
from app.chat.conversation_list_widget import ConversationListWidget
from app.chat.conversation_model import ConversationModel
from app.chat.store_opening import open_store
from app.chat.generation_controller import GenerationController
from app.chat.image_parts import sees_images
from app.chat.token_counter import TokenCounter
from app.engine_api import api, format_bytes, parse_size
from app.engine_bridge import EngineBridge
from app.error_dialog import show_error
from app.icons import icon
from app.launch_options import DEMO, LaunchOptions
from app.log_folder_dialog import LogFolderDialog
from app.logs import setup_logging
from app.mcp.tools_controller import ToolsController
from app.memory.budget_controller import BudgetController
from app.memory.budget_range import budget_range
from app.memory.host_budget_dialog import HostBudgetDialog
from app.memory.memory_panel_widget import MemoryPanelWidget
from app.memory.plan_text import plan_summary
from app.model_loader import LoadRequest, ModelLoader
from app.none_refcount_guard import guard_none_refcount
from app.picker.model_picker_dialog import ModelPickerDialog
from app.server_controller import ServerController
from app.server_widget import ServerWidget
from app.settings import SettingsStore
from app.speculation_choice import has_draft_layers, load_mode
from app.status_bar_widget import StatusBarWidget
from app.theme import apply_theme, resolve_theme
from app.window_geometry import GeometrySaver, restore_geometry
from app.window_actions import MTP_TIP, NO_MTP_TIP, build_menus, build_tool_bar, create_actions

CONTEXT_RECOUNT_MS = 150  # the status bar's context count follows typing in the system prompt at this pace


class MainWindowWidget(QMainWindow):
    def __init__(self, launch: LaunchOptions = LaunchOptions()):
        super().__init__()
        self.launch = launch
        self.paths = AppPaths.resolve(launch.data_dir).create()
        setup_logging(self.paths.log_file)
        guard_none_refcount()
        self._settings_store = SettingsStore(self.paths.settings_file)
        self.settings = self._settings_store.load()
        if launch.theme:
            self.settings = self.settings.with_changes(theme=launch.theme)
        self.theme = resolve_theme(self.settings.theme)
        apply_theme(self.theme)
        self.store, store_problem = open_store(self.paths.database)
        self.bridge = EngineBridge(self)
        self.loader = ModelLoader(self.bridge, self)
        self.server = ServerController(lambda: self.loader.engine, self)
        self.loader.add_release_hook(self.server.release)
        self.conversation = ConversationModel(self.store, self)
        self.tools = ToolsController(self.settings.mcp_servers, self)
        self.generation = GenerationController(self.conversation, self.bridge, lambda: self.loader.engine,
                                               lambda: replace(self.chat.settings_bar.settings(),
                                                               speculative=self.settings.speculative), self,
                                               policy_source=lambda: self.conversation.context_policy,
                                               tools=self.tools.runner, attached_source=self._attached_context)
        self._build_widgets()
        self._connect()
        self._restore()
        self._picker: ModelPickerDialog | None = None
        self._host_budget_dialog: HostBudgetDialog | None = None
        self.log_folder_dialog: LogFolderDialog | None = None  # shown when no file manager opens the logs
        self._host_total_bytes: int | None = None
        self._announced_engine = None
        if store_problem:
            QTimer.singleShot(0, lambda: show_error(self, "Saved conversations could not be read", store_problem))
        if self._settings_store.problems:
            QTimer.singleShot(0, self._report_settings_problems)
        self._geometry = GeometrySaver(self, lambda text: self._save_settings(window_geometry=text))
        run_in_background(lambda report: api().detect_hardware(), on_success=self._on_hardware_task_succeeded,
                          on_failure=self._on_hardware_task_failed)

    def _build_widgets(self) -> None:
        self.setWindowTitle("Wisp")
        self.setWindowIcon(icon("wisp"))
        self.resize(1400, 860)
        self.window_actions = create_actions(self)
        build_menus(self, self.window_actions)
        build_tool_bar(self, self.window_actions)
        self.conversations = ConversationListWidget(self.store, self)
        self.chat = ChatWidget(self.conversation, self.generation, self.theme.render_style, self)
        self.memory_panel = MemoryPanelWidget(self.theme, format_bytes, parse_size, self)
        self.memory_panel.set_engine_source(lambda: self.loader.engine)
        self.budget = BudgetController(self.memory_panel.budget_slider, lambda: self.loader.engine, self)
        self.server_panel = ServerWidget(self.server, self.settings.server_port, self)
        side = QWidget(self)
        side_layout = QVBoxLayout(side)
        side_layout.setContentsMargins(0, 0, 0, 0)
        side_layout.addWidget(self.server_panel)
        side_layout.addWidget(self.memory_panel, 1)
        panel_scroll = QScrollArea(self, widgetResizable=True)
        panel_scroll.setWidget(side)
        panel_scroll.setFrameShape(panel_scroll.frameShape().NoFrame)
        panel_scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        panel_scroll.verticalScrollBar().setAccessibleName("Scroll the side panel")
        scroll_bar = panel_scroll.verticalScrollBar().sizeHint().width()
        panel_scroll.setMinimumWidth(side.minimumSizeHint().width() + scroll_bar)  # never narrower than it needs
        splitter = QSplitter(self)
        for widget, width in ((self.conversations, 230), (self.chat, 760), (panel_scroll, 390)):
            splitter.addWidget(widget)
        splitter.setSizes([230, 760, 390])
        splitter.setStretchFactor(1, 1)
        self.setCentralWidget(splitter)
        self.status = StatusBarWidget(self)
        self.setStatusBar(self.status)
        self.status.addPermanentWidget(self.tools.label)

    def _connect(self) -> None:
        actions = self.window_actions
        actions.new_chat.triggered.connect(self.new_chat)
        actions.send.triggered.connect(self.chat.composer.submit)
        actions.stop.triggered.connect(self.generation.stop)
        actions.choose_model.triggered.connect(self.open_model_picker)
        actions.open_model_folder.triggered.connect(self._on_open_model_folder_triggered)
        actions.repeatable.toggled.connect(self.set_repeatable)
        actions.host_memory.triggered.connect(self.open_host_budget_dialog)
        actions.dense_q8_0.toggled.connect(self.set_q8_0_dense_weights)
        for name, action in actions.drafts.items():
            action.triggered.connect(lambda _=False, name=name: self.set_speculative(name))
        for name, action in actions.gguf_engines.items():
            action.triggered.connect(lambda _=False, name=name: self.set_gguf_engine(name))
        actions.chat_mode.triggered.connect(lambda: self.chat.set_mode("chat"))
        actions.code_mode.triggered.connect(lambda: self.chat.set_mode("code"))
        for name, action in actions.themes.items():
            action.triggered.connect(lambda _=False, name=name: self.set_theme(name))
        actions.open_logs.triggered.connect(self._on_open_logs_triggered)
        actions.mcp_servers.triggered.connect(self.tools.open_dialog)
        self.tools.servers_saved.connect(lambda servers: self._save_settings(mcp_servers=servers))
        actions.quit.triggered.connect(self.close)
        QGuiApplication.styleHints().colorSchemeChanged.connect(self._on_style_hints_color_scheme_changed)
        self.loader.loading.connect(self._on_loader_loading)
        self.loader.progressed.connect(self.status.show_progress)
        self.loader.ready.connect(self._on_loader_ready)
        self.loader.failed.connect(lambda message: show_error(self, "Could not load the model", message))
        self.loader.unloaded.connect(self._on_loader_unloaded)
        self.loader.budget_refused.connect(self._on_loader_budget_refused)
        self.budget.load_requested.connect(self.load_model)
        self.bridge.plan_changed.connect(self._on_bridge_plan_changed)
        self.budget.applied.connect(lambda num_bytes: self._save_settings(budget_bytes=num_bytes))
        self.generation.failed.connect(lambda message: show_error(self, "Generation failed", message))
        self.server.failed.connect(lambda message: show_error(self, "Could not start the API server", message))
        self.server.started.connect(lambda url: self._save_settings(server_port=self.server_panel.port))
        self.generation.context_used.connect(self.status.show_context)
        self._context_timer = QTimer(self, singleShot=True, interval=CONTEXT_RECOUNT_MS)
        self._context_timer.timeout.connect(self.generation.refresh_context)
        for signal in (self.conversation.reset, self.conversation.truncated, self.conversation.context_policy_changed,
                       self.chat.settings_bar.changed, self.chat.settings_bar.prompt_edit.textChanged,
                       self.chat.mode_changed, self.chat.code_context.attachments_changed):
            signal.connect(self._context_timer.start)
        self.status.policy_chosen.connect(self.conversation.set_context_policy)
        self.conversation.reset.connect(lambda: self.status.show_policy(self.conversation.context_policy))
        self.generation.busy_changed.connect(self._on_generation_busy_changed)
        self.conversations.conversation_activated.connect(self.open_conversation)
        self.conversations.conversation_deleted.connect(self._on_conversations_conversation_deleted)
        self.conversation.conversation_saved.connect(self._on_conversation_saved)
        self.conversation.save_failed.connect(lambda why: self.status.showMessage(f"Not saved: {why}", 10_000))
        self.chat.mode_changed.connect(self._on_chat_mode_changed)
        self.chat.settings_bar.changed.connect(self._save_sampling)

    def _restore(self) -> None:
        settings = self.settings
        self.chat.settings_bar.set_sampling(settings.temperature, settings.top_p, settings.max_tokens)
        self.chat.settings_bar.set_reasoning_effort(settings.reasoning_effort)
        self.chat.settings_bar.thinking.setChecked(settings.thinking)
        self.chat.settings_bar.extras.set_values(settings.sampling_extras)
        self.chat.set_mode(settings.mode)
        self.window_actions.themes[settings.theme].setChecked(True)
        self.window_actions.repeatable.setChecked(settings.repeatable)
        self.window_actions.dense_q8_0.setChecked(settings.dense_quant == "q8_0")
        self.window_actions.drafts[settings.speculative].setChecked(True)
        self._show_draft_layers(None)
        self.window_actions.gguf_engines[settings.gguf_engine].setChecked(True)
        restore_geometry(self, settings.window_geometry)
        if settings.last_conversation_id is not None:
            self.open_conversation(settings.last_conversation_id)
        self.status.show_no_model("Starting the engine…")

    # --- things a user (or a test) does ---
    def new_chat(self) -> None:
        self.generation.abandon()
        self.conversation.start_new()
        self.conversations.select(None)
        self.chat.composer.editor.setFocus()

    def open_conversation(self, conversation_id: int) -> None:
        self.generation.abandon()
        if self.conversation.open(conversation_id):
            self.conversations.select(conversation_id)
            self._save_settings(last_conversation_id=conversation_id)

    def load_model(self, model: str | None) -> bool:
        """Load a model folder (None: the bundled demo) at the slider's budget."""
        budget = self.memory_panel.budget_slider.budget_bytes if self.memory_panel.budget_slider.has_range else None
        return self.loader.load(LoadRequest(model, budget or self.settings.budget_bytes, self.launch.device,
                                            api_key=self.settings.api_key_for(model),
                                            deterministic=self.settings.repeatable,
                                            gguf_engine=self.settings.gguf_engine,
                                            host_budget_bytes=self.settings.host_budget_bytes,
                                            dense_quant=self.settings.dense_quant,
                                            speculative=load_mode(self.settings.speculative)))

    def load_model_at(self, model: str | None, budget_bytes: int) -> bool:
        """Load a model at this budget (the picker's "Load at the minimum"); the slider shows it."""
        self.memory_panel.budget_slider.set_budget(budget_bytes)
        return self.load_model(model)

    def open_model_picker(self) -> ModelPickerDialog:
        budget = self.memory_panel.budget_slider.budget_bytes
        request = self.loader.request if self.loader.engine is not None else None
        loaded = (self.loader.engine.info.path if request is not None and not request.is_remote
                  else request.model if request is not None else None)
        self._picker = ModelPickerDialog(self.settings.model_folders, budget, self.theme, self,
                                         remote_servers=self.settings.remote_servers, device=self.launch.device,
                                         loaded=loaded, gguf_engine=self.settings.gguf_engine,
                                         dense_quant=self.settings.dense_quant)
        self._picker.model_chosen.connect(self.load_model)
        self._picker.model_chosen_at_minimum.connect(self.load_model_at)
        self._picker.folders_changed.connect(lambda folders: self._save_settings(model_folders=folders))
        self._picker.remote_servers_changed.connect(lambda servers: self._save_settings(remote_servers=servers))
        self._picker.open()
        return self._picker

    def set_theme(self, name: str) -> None:
        self.theme = resolve_theme(name)
        apply_theme(self.theme)
        self.chat.view.set_render_style(self.theme.render_style)
        self.memory_panel.set_theme(self.theme)
        self.window_actions.themes[name].setChecked(True)
        self._save_settings(theme=name)

    def set_repeatable(self, enabled: bool) -> None:
        """Deterministic kernels on or off; the engine picks its kernels when it loads, so a loaded local model
        is loaded again (a remote server has its own)."""
        if enabled == self.settings.repeatable:
            return
        self._save_settings(repeatable=enabled)
        self.window_actions.repeatable.setChecked(enabled)
        request = self.loader.request
        if request is not None and not request.is_remote and self.loader.engine is not None:
            self.load_model(request.model)

    def set_q8_0_dense_weights(self, enabled: bool) -> None:
        """A checkpoint's dense weights quantized to Q8_0 at load, or kept as stored; a loaded checkpoint is loaded
        again (a GGUF file keeps its own types, a remote server its own weights)."""
        dense_quant = "q8_0" if enabled else None
        if dense_quant == self.settings.dense_quant:
            return
        self._save_settings(dense_quant=dense_quant)
        self.window_actions.dense_q8_0.setChecked(enabled)
        request = self.loader.request
        if request is not None and not request.is_remote and not request.is_gguf and self.loader.engine is not None:
            self.load_model(request.model)

    def set_speculative(self, choice: str) -> None:
        """How the next requests draft (app.speculation_choice). Each request says whether it drafts; a loaded model
        with draft layers is loaded again when they are to be loaded or dropped."""
        self.window_actions.drafts[choice].setChecked(True)
        previous = self.settings.speculative
        if choice == previous:
            return
        self._save_settings(speculative=choice)
        request, engine = self.loader.request, self.loader.engine
        if load_mode(choice) != load_mode(previous) and has_draft_layers(engine) and not request.is_remote:
            self.load_model(request.model)

    def _show_draft_layers(self, engine) -> None:
        """The MTP choice is open for a model with draft layers only."""
        mtp = self.window_actions.drafts_mtp
        mtp.setEnabled(has_draft_layers(engine))
        mtp.setToolTip(MTP_TIP if has_draft_layers(engine) else NO_MTP_TIP)

    def open_host_budget_dialog(self) -> HostBudgetDialog:
        self._host_budget_dialog = HostBudgetDialog(self.settings.host_budget_bytes, self._host_total_bytes, self)
        self._host_budget_dialog.chosen.connect(self.set_host_budget)
        self._host_budget_dialog.open()
        return self._host_budget_dialog

    def set_host_budget(self, num_bytes: int | None) -> None:
        """The host-RAM cap for experts (None: automatic); the engine pins at load, so a loaded local model is
        loaded again."""
        if num_bytes == self.settings.host_budget_bytes:
            return
        self._save_settings(host_budget_bytes=num_bytes)
        request = self.loader.request
        if request is not None and not request.is_remote and self.loader.engine is not None:
            self.load_model(request.model)

    def set_gguf_engine(self, name: str) -> None:
        """Which engine runs GGUF files (app.settings.GGUF_ENGINES); a loaded GGUF model is loaded again on it."""
        self.window_actions.gguf_engines[name].setChecked(True)
        if name == self.settings.gguf_engine:
            return
        self._save_settings(gguf_engine=name)
        request = self.loader.request
        if request is not None and request.is_gguf and self.loader.engine is not None:
            self.load_model(request.model)

    def _save_settings(self, **changes) -> None:
        self.settings = self.settings.with_changes(**changes)
        self._settings_store.save(self.settings)
        if self._settings_store.save_error:
            self.status.showMessage(f"Settings not saved: {self._settings_store.save_error}", 10_000)

    def _report_settings_problems(self) -> None:
        problems = "\n".join(f"• {problem}" for problem in self._settings_store.problems)
        show_error(self, "Some settings could not be read",
                   f"These settings went back to their defaults; the others are kept:\n{problems}\n\nThe file "
                   f"is kept as {self.paths.settings_file.name}.bad-DATE next to it when the settings are next saved.")

    # --- slots ---
    def _on_hardware_task_succeeded(self, hardware) -> None:
        self._host_total_bytes = hardware.host_total_bytes
        limits = budget_range(hardware, format_bytes)
        slider = self.memory_panel.budget_slider
        slider.set_range(limits)
        slider.set_budget(self.launch.budget_bytes or self.settings.budget_bytes or limits.default)
        if self.launch.is_autoload:
            model = self.settings.last_model if self.launch.model is None else self.launch.model
            self.load_model(None if model == DEMO else model)

    @Slot(str, object)
    def _on_loader_budget_refused(self, message: str, minimum: int | None) -> None:
        self.budget.show_load_refused(self.loader.refused_request.model, message, minimum)
        if self.loader.engine is None:
            self.status.show_no_model("No model loaded: the budget is too small (see the memory panel)")

    def _on_hardware_task_failed(self, error: BaseException) -> None:
        show_error(self, "Could not start the engine", f"{type(error).__name__}: {error}")
        self.status.show_no_model("The engine could not start (see Help → Open logs)")

    @Slot(str)
    def _on_loader_loading(self, text: str) -> None:
        self.generation.abandon()
        self.chat.set_ready(False)
        self.status.clear_context()
        self.status.show_loading(text)
        self.server_panel.set_model_loading()

    @Slot(object)
    def _on_loader_ready(self, info) -> None:
        self.chat.set_ready(True)
        self.chat.settings_bar.set_reasoning_available(info.reasoning_effort, info.thinking_switch)
        self.chat.composer.set_fill_in_middle(info.fill_in_middle)
        self.chat.composer.set_sees_images(sees_images(self.loader.engine))
        self._show_draft_layers(self.loader.engine)
        self.status.show_model(info)
        self.tools.set_model_info(info)
        self.server_panel.set_model_ready()
        self.chat.code_context.set_token_counter(TokenCounter(info.path))
        plan = self.loader.engine.stats().plan  # a model kept after a refused load may have re-planned since
        self.budget.show_plan(plan, is_kept=self.loader.engine is self._announced_engine)
        self.budget.fetch_marks(self.loader.request)
        self.memory_panel.refresh()
        self.generation.refresh_context()  # another model: another context length and tokenizer
        if self.loader.engine is not self._announced_engine:  # a refused load keeps the model already announced
            self._announced_engine = self.loader.engine
            self.memory_panel.plan_log.add_text(f"serving {info.name}: {plan_summary(plan, format_bytes)}")
        request = self.loader.request
        self._save_settings(last_model=request.model if request else None)

    @Slot()
    def _on_loader_unloaded(self) -> None:
        self.chat.set_ready(False)
        self.chat.composer.set_sees_images(False)
        self._show_draft_layers(None)
        self.status.clear_context()
        self.status.show_no_model()
        self.server_panel.set_no_model()

    @Slot(object)
    def _on_bridge_plan_changed(self, event) -> None:
        self.memory_panel.add_plan_event(event)
        self.budget.on_plan_event(event)

    @Slot(bool)
    def _on_generation_busy_changed(self, is_busy: bool) -> None:
        if not is_busy:
            self.budget.retry_if_stranded()

    @Slot("qint64")
    def _on_conversations_conversation_deleted(self, conversation_id: int) -> None:
        current = self.conversation.conversation
        if current is not None and current.id == conversation_id:
            self.generation.abandon()
            self.conversation.start_new()

    @Slot(object)
    def _on_conversation_saved(self, conversation) -> None:
        self.conversations.refresh(conversation.id)
        if conversation.id != self.settings.last_conversation_id:
            self._save_settings(last_conversation_id=conversation.id)

    @Slot(str)
    def _on_chat_mode_changed(self, mode: str) -> None:
        (self.window_actions.code_mode if mode == "code" else self.window_actions.chat_mode).setChecked(True)
        self._save_settings(mode=mode)

    @Slot()
    def _on_open_model_folder_triggered(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Open a model folder")
        if folder:
            self.load_model(folder)

    @Slot()
    def _on_open_logs_triggered(self) -> None:
        if not QDesktopServices.openUrl(QUrl.fromLocalFile(str(self.paths.log_dir))):  # no desktop launcher
            self.log_folder_dialog = LogFolderDialog(self.paths.log_dir, self.paths.log_file.name, self)
            self.log_folder_dialog.open()

    @Slot()
    def _on_style_hints_color_scheme_changed(self, *_) -> None:
        if self.settings.theme == "system":
            self.set_theme("system")

    def _save_sampling(self) -> None:
        sampling = self.chat.settings_bar.settings()
        self._save_settings(temperature=sampling.temperature, top_p=sampling.top_p, max_tokens=sampling.max_tokens,
                            reasoning_effort=self.chat.settings_bar.chosen_reasoning_effort(),
                            thinking=self.chat.settings_bar.thinking.isChecked(),
                            sampling_extras=self.chat.settings_bar.extras.values())

    def _attached_context(self) -> str:
        return self.chat.code_context.context_text() if self.chat.mode == "code" else ""

    def closeEvent(self, event) -> None:
        self.generation.abandon()
        self._save_sampling()
        self._geometry.save_now()
        self.loader.shutdown()
        self.tools.close()
        wait_for_background_tasks()
        self.store.close()
        super().closeEvent(event)
