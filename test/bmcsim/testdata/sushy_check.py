"""Drive the Redfish BMC simulator with python3-sushy, a client that is not
Kiln's: BIOS read/patch/apply-on-reset, Storage volumes, SecureBoot,
UpdateService SimpleUpdate with its task, virtual media under the Manager,
the indicator LED and a manager reset.

usage: sushy_check.py URL USER PASSWORD PERSONALITY
Prints one "ok <step>" line per step; any failure raises (exit status 1).
"""

import sys
import time

import sushy
from sushy import exceptions

url, user, password, personality = sys.argv[1:5]
DEADLINE = 60  # seconds; a safety net, tasks finish in about one


def step(name):
    print("ok", name, flush=True)


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def wait_task(monitor, what):
    """Poll a task monitor until it stops processing (sushy's own wait()
    sleeps on the Retry-After string and fails, so poll here)."""
    check(monitor is not None, what + ": no task monitor")
    end = time.monotonic() + DEADLINE
    while monitor.check_is_processing:
        check(time.monotonic() < end, what + ": task still running")
        time.sleep(0.2)
    check(monitor.response.status_code == 200,
          "%s: monitor ended with %d" % (what, monitor.response.status_code))


root = sushy.Sushy(url + "/redfish/v1", username=user, password=password,
                   verify=False)
# Debian's python3-sushy 4.3 lacks the sushy/standard_registries directory
# its registry lookup lists first (FileNotFoundError); do without the DMTF
# standard registries so the service's own Registries are what is tested.
root._get_standard_message_registry_collection = lambda: []
system = root.get_system()
manager = root.get_manager()

# Indicator LED.
system.set_indicator_led(sushy.IndicatorLED.BLINKING)
system.refresh()
check(system.indicator_led == sushy.IndicatorLED.BLINKING,
      "LED %s" % system.indicator_led)
system.set_indicator_led(sushy.IndicatorLED.OFF)
system.refresh()
check(system.indicator_led == sushy.IndicatorLED.OFF, "LED off")
step("indicator-led")

# Memory: sushy 4.3 has no Memory resource class; read it through its
# connector so the collection is still held to sushy's HTTP handling.
mem = root._conn.get(system.path + "/Memory").json()
check(mem["Members@odata.count"] >= 1, "memory %s" % mem)
step("memory")

# Secure boot: enable, takes effect at the next boot; delete the keys.
sb = system.secure_boot
check(sb.enabled is False, "secure boot initially on")
sb.set_enabled(True)
sb.refresh()
check(sb.enabled is True, "SecureBootEnable not stored")
check(sb.current_boot == sushy.SecureBootCurrentBoot.DISABLED,
      "secure boot active before a boot")
system.reset_system(sushy.ResetType.ON)
sb.refresh()
check(sb.current_boot == sushy.SecureBootCurrentBoot.ENABLED,
      "secure boot not active after boot: %s" % sb.current_boot)
check(sushy.SecureBootResetKeysType.DELETE_ALL_KEYS
      in sb.get_allowed_reset_keys_values(), "reset keys values")
sb.reset_keys(sushy.SecureBootResetKeysType.DELETE_ALL_KEYS)
sb.refresh()
check(sb.mode == sushy.SecureBootMode.SETUP, "mode %s" % sb.mode)
sb.reset_keys(sushy.SecureBootResetKeysType.RESET_ALL_KEYS_TO_DEFAULT)
sb.set_enabled(False)
step("secure-boot")

# BIOS: attributes, registry, settings applied at the next reset.
bios = system.bios
check(bios.attributes["ProcVirtualization"] == "Enabled",
      "attributes %s" % bios.attributes)
registry = bios.get_attribute_registry()
check(registry is not None, "no attribute registry")
entries = {a.name: a for a in registry.registry_entries.attributes}
pv = entries["ProcVirtualization"]
check(pv.attribute_type == "Enumeration" and pv.reset_required
      and not pv.read_only, "ProcVirtualization entry")
check(sorted(v["ValueName"] for v in pv.allowable_values)
      == ["Disabled", "Enabled"], "allowable values")
check(entries["SystemServiceTag"].read_only, "SystemServiceTag read-only")
step("bios-registry")

new = {"ProcVirtualization": "Disabled", "SriovGlobalEnable": "Enabled"}
if personality == "supermicro":
    # Supermicro insists on If-Match for BIOS settings; sushy sends none.
    try:
        bios.set_attributes(new)
        raise AssertionError("supermicro accepted a PATCH without If-Match")
    except exceptions.HTTPError as e:
        check(e.status_code == 428, "supermicro without If-Match: %d"
              % e.status_code)
    settings = bios._settings.resource_uri
    etag = root._conn.get(settings).headers["ETag"]
    root._conn.patch(settings, data={"Attributes": new},
                     headers={"If-Match": etag})
else:
    bios.set_attributes(new)
bios.refresh()
check(bios.pending_attributes["ProcVirtualization"] == "Disabled",
      "pending %s" % bios.pending_attributes)
check(bios.attributes["ProcVirtualization"] == "Enabled",
      "applied before reset")
system.reset_system(sushy.ResetType.FORCE_RESTART)
bios.refresh()
check(bios.attributes["ProcVirtualization"] == "Disabled"
      and bios.attributes["SriovGlobalEnable"] == "Enabled",
      "not applied after reset: %s" % bios.attributes)
from sushy.resources import settings as rsettings  # noqa: E402
check(bios.update_status.status == rsettings.UPDATE_SUCCESS,
      "update status %s" % bios.update_status.status)
bios.reset_bios()
system.reset_system(sushy.ResetType.FORCE_RESTART)
bios.refresh()
check(bios.attributes["ProcVirtualization"] == "Enabled", "reset_bios")
step("bios-apply-on-reset")

# Storage: a RAID-1 volume through a task monitor, then deleted.
storage = system.storage.get_members()[0]
check(sushy.RAIDType.RAID1 in storage.storage_controllers[0].raid_types,
      "RAID types %s" % storage.storage_controllers[0].raid_types)
drives = storage.drives
check(len(drives) >= 2, "drives %s" % drives)
volumes = storage.volumes
check(len(volumes.members_identities) == 0, "volumes at start")
monitor = volumes.create({
    "Name": "root", "RAIDType": "RAID1",
    "Links": {"Drives": [{"@odata.id": d.path} for d in drives[:2]]}})
wait_task(monitor, "create volume")
# get_members() is cached across refreshes of a collection (sushy 4.3);
# read the refreshed member identities instead.
volumes.refresh()
members = [volumes.get_member(i) for i in volumes.members_identities]
check(len(members) == 1 and members[0].raid_type == sushy.RAIDType.RAID1
      and members[0].capacity_bytes == drives[0].capacity_bytes,
      "volume %s" % members)
wait_task(members[0].delete(), "delete volume")
volumes.refresh()
check(len(volumes.members_identities) == 0, "volume not deleted")
step("storage-volumes")

# Firmware: SimpleUpdate is a task; the version changes at the next boot.
updates = root.get_update_service()


def bios_version():
    for fw in updates.firmware_inventory.get_members():
        if fw.identity == "BIOS":
            return fw.version
    raise AssertionError("no BIOS in the firmware inventory")


before = bios_version()
wait_task(updates.simple_update("http://10.0.2.2/fw/bios-7.1.2.bin"),
          "simple update")
updates.firmware_inventory.refresh()
check(bios_version() == before, "version changed before the reboot")
system.reset_system(sushy.ResetType.FORCE_RESTART)
updates.firmware_inventory.refresh()
check(bios_version() == "7.1.2", "version after reboot %s" % bios_version())
step("simple-update")

# Virtual media under the Manager.
vm = manager.virtual_media.get_members()[0]
vm.insert_media("http://10.0.2.2/boot.iso")
vm.refresh()
check(vm.inserted and vm.image == "http://10.0.2.2/boot.iso",
      "after insert %s %s" % (vm.inserted, vm.image))
vm.eject_media()
vm.refresh()
check(not vm.inserted, "still inserted after eject")
step("manager-virtual-media")

# Manager reset: the BMC forgets the session; sushy logs in again.
allowed = manager.get_allowed_reset_manager_values()
check(sushy.ResetType.GRACEFUL_RESTART in allowed, "allowed %s" % allowed)
manager.reset_manager(sushy.ResetType.GRACEFUL_RESTART)
system.refresh()
check(system.power_state == sushy.PowerState.ON, "host affected by BMC reset")
step("manager-reset")
