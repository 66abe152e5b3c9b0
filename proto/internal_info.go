package proto

// Keys of driver_internal_info. The agent_* keys are Ironic's (clients and
// operators read them); the kiln_* keys carry work between Kiln's API and its
// conductor, through the store.
const (
	InfoAgentURL            = "agent_url"
	InfoAgentVersion        = "agent_version"
	InfoAgentLastHeartbeat  = "agent_last_heartbeat"
	InfoAgentVerifyCA       = "agent_verify_ca"
	InfoAgentToken          = "agent_secret_token"
	InfoAgentTokenPregen    = "agent_secret_token_pregenerated"
	InfoCachedCleanSteps    = "agent_cached_clean_steps"
	InfoCachedDeploySteps   = "agent_cached_deploy_steps"
	InfoCachedServiceSteps  = "agent_cached_service_steps"
	InfoCachedStepsVersions = "kiln_cached_steps_versions"

	// InfoRequest is the provision request the API recorded and the
	// conductor has not yet taken up: {"verb", "from", "requested_at", steps…}.
	InfoRequest = "kiln_request"
	// InfoBootDevice is the requested boot device {"boot_device","persistent"};
	// InfoBootDevicePending says the conductor has yet to apply it.
	InfoBootDevice        = "kiln_boot_device"
	InfoBootDevicePending = "kiln_boot_device_pending"
	// InfoPowerTimeout is the timeout (s) of a pending soft power request.
	InfoPowerTimeout = "kiln_power_timeout"
	// InfoHeartbeatPending says an agent heartbeat arrived that the conductor
	// has not yet acted on.
	InfoHeartbeatPending = "kiln_heartbeat_pending"
	// InfoInspectionPending says the agent delivered an inventory.
	InfoInspectionPending = "kiln_inspection_pending"
	// InfoSteps is the ordered step list of the running clean/deploy flow,
	// InfoStepIndex the position of the current step and InfoStepSent
	// whether the current in-band step was handed to the agent.
	InfoSteps     = "kiln_steps"
	InfoStepIndex = "kiln_step_index"
	InfoStepSent  = "kiln_step_sent"
	// InfoStepSentAt is when the current step went to the agent (RFC 3339).
	InfoStepSentAt = "kiln_step_sent_at"
	// InfoPartitionUUIDs are the deployed image's root/EFI partitions.
	InfoPartitionUUIDs = "kiln_partition_uuids"
)
