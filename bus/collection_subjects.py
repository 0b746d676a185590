"""Subjects of the collection commands (request-reply, answered with a CommandResult)."""

from __future__ import annotations

CMD_COLLECTION_CREATE = "cmd.collection.create"
CMD_COLLECTION_UPDATE_METADATA = "cmd.collection.update_metadata"
CMD_COLLECTION_ADD_DOCUMENTS = "cmd.collection.add_documents"
CMD_COLLECTION_EMPTY = "cmd.collection.empty"
CMD_COLLECTION_DELETE = "cmd.collection.delete"
