"""Renaming a conversation with F2 in the list keeps it selected, so the Rename button (and Delete, Export) still
act on it."""

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QAbstractItemView, QLineEdit

from app.chat.conversation_store import ConversationStore, Message


def type_title(qtbot, view, title: str) -> None:
    """Type into the open title editor (earlier editors may linger until deleted) and press Enter."""
    qtbot.waitUntil(lambda: view.state() == QAbstractItemView.State.EditingState, timeout=5000)
    editor = next(e for e in view.findChildren(QLineEdit) if e.isVisible())
    editor.selectAll()
    qtbot.keyClicks(editor, title)
    qtbot.keyClick(editor, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: view.state() != QAbstractItemView.State.EditingState, timeout=5000)


def test_f2_rename_keeps_the_selection_and_rename_still_works(qtbot, start_app, data_dir):
    store = ConversationStore(data_dir / "conversations.sqlite3")
    ids = [store.create(f"chat {n}", "chat", "").id for n in range(3)]
    for conversation_id in ids:
        store.add_message(conversation_id, 0, Message("user", "hello"))
    store.close()
    window = start_app(is_autoload=False, is_ready_awaited=False)
    listing = window.conversations
    oldest = listing.model.row_of(ids[0])
    index = listing.model.index(oldest)
    qtbot.mouseClick(listing.view.viewport(), Qt.MouseButton.LeftButton, pos=listing.view.visualRect(index).center())
    assert listing.selected_id() == ids[0]

    qtbot.keyClick(listing.view, Qt.Key.Key_F2)
    type_title(qtbot, listing.view, "Renamed with F2")
    assert window.store.get(ids[0]).title == "Renamed with F2"
    assert listing.selected_id() == ids[0]
    assert listing.view.selectionModel().isSelected(listing.view.currentIndex())

    qtbot.mouseClick(listing.rename_button, Qt.MouseButton.LeftButton)
    type_title(qtbot, listing.view, "Renamed again")  # the button edits the selected title
    assert window.store.get(ids[0]).title == "Renamed again"
    assert listing.selected_id() == ids[0]
