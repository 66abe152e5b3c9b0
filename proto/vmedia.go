package proto

// Virtual media requests (Ironic's /v1/nodes/{id}/vmedia: attach and
// detach 1.89, read 1.93), carried by ManagementRequest to the conductor.
const (
	OpAttachVirtualMedia = "attach_virtual_media"
	OpDetachVirtualMedia = "detach_virtual_media"
	OpGetVirtualMedia    = "get_virtual_media"
)

// VirtualMediaDeviceTypes are Ironic's virtual media device types
// (boot_devices.VMEDIA_DEVICES): a USB stick, a CD and a floppy.
var VirtualMediaDeviceTypes = []string{"disk", "cdrom", "floppy"}

// VirtualMediaAttach is the body of POST /v1/nodes/{id}/vmedia.
type VirtualMediaAttach struct {
	DeviceType string `json:"device_type"`
	ImageURL   string `json:"image_url"`
	// ImageDownloadSource is how the image reaches the BMC: "http" (its
	// URL as given) or "local" (Ironic's default: Ironic serves a copy;
	// Kiln hands the BMC the URL as given too).
	ImageDownloadSource string `json:"image_download_source,omitempty"`
}

// VirtualMedia is one virtual media device as GET …/vmedia shows it, in
// the BMC's words (Redfish MediaTypes: "CD", "DVD", "Floppy", "USBStick").
type VirtualMedia struct {
	MediaTypes []string `json:"media_types"`
	Inserted   bool     `json:"inserted"`
	Image      string   `json:"image"`
}
