// Package boot serves network boot: per-node iPXE scripts and the files
// they load (deploy kernel, ramdisk, virtual-media ISOs).
//
// What a node boots is the controller's decision, made from its store
// (ports → node → provision state) behind the one-method Backend interface;
// the script itself is rendered by the pure RenderScript. A deployed
// instance boots from its local disk, so the agent script is only served
// while a node deploys, cleans, inspects or is discovered.
//
// The controller mounts both handlers under /boot/ on its API listener:
//
//	scripts := boot.NewScriptHandler(boot.Config{
//		APIURL:     "http://ctrl:6385",
//		KernelURL:  "http://ctrl:6385/boot/files/kiln-agent.kernel",
//		RamdiskURL: "http://ctrl:6385/boot/files/kiln-agent.initramfs",
//		Console:    "ttyS0,115200n8",
//		Unknown:    boot.Discovery,
//	}, backend)
//	files, err := boot.NewFileServer("/var/lib/kiln/boot")
//	mux.Handle("GET /boot/boot.ipxe", scripts)
//	mux.Handle("/boot/files/", http.StripPrefix("/boot/files", files))
//
// (with echo: e.GET("/boot/boot.ipxe", echo.WrapHandler(scripts)) and
// e.Any("/boot/files/*", echo.WrapHandler(http.StripPrefix("/boot/files", files)))).
// DHCP.md describes the dnsmasq side that chains PXE clients to
// /boot/boot.ipxe, for BIOS and UEFI.
package boot
