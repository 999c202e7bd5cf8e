"""The `type` of each JetStream API response, as nats-server names them."""

from __future__ import annotations

API_PREFIX = "io.nats.jetstream.api.v1."
ACCOUNT_INFO_TYPE = API_PREFIX + "account_info_response"
STREAM_CREATE_TYPE = API_PREFIX + "stream_create_response"
STREAM_UPDATE_TYPE = API_PREFIX + "stream_update_response"
STREAM_INFO_TYPE = API_PREFIX + "stream_info_response"
STREAM_NAMES_TYPE = API_PREFIX + "stream_names_response"
STREAM_LIST_TYPE = API_PREFIX + "stream_list_response"
STREAM_DELETE_TYPE = API_PREFIX + "stream_delete_response"
STREAM_PURGE_TYPE = API_PREFIX + "stream_purge_response"
MSG_DELETE_TYPE = API_PREFIX + "stream_msg_delete_response"
LEADER_STEPDOWN_TYPE = API_PREFIX + "stream_leader_stepdown_response"
MSG_GET_TYPE = API_PREFIX + "stream_msg_get_response"
PEER_REMOVE_TYPE = API_PREFIX + "stream_remove_peer_response"
ERROR_TYPE = API_PREFIX + "error_response"
