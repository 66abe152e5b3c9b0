#!/bin/sh
# Regenerates testdata/sys: a fixture sysfs tree with one of each kind of
# block device Enumerate must list or skip. Run from agent/disk.
set -e
R=testdata/sys
rm -rf $R; mkdir -p $R/block
# dev NAME DEVPATH SECTORS ROT RO REMOVABLE LBS PBS
dev() {
	name=$1 path=$R/devices/$2/block/$1
	mkdir -p $path/queue
	echo $3 > $path/size; echo $4 > $path/queue/rotational; echo $5 > $path/ro
	echo $6 > $path/removable; echo $7 > $path/queue/logical_block_size; echo $8 > $path/queue/physical_block_size
	ln -s ../devices/$2/block/$1 $R/block/$1
	if [ -d $R/devices/$2 ] && [ "$2" != "virtual" ]; then ln -s ../.. $path/device; fi
}
G=2097152 # sectors per GiB
dev sda pci0000:00/0000:00:1f.2/ata1/host0/target0:0:0/0:0:0:0 $((500*G)) 1 0 0 512 4096
D=$R/devices/pci0000:00/0000:00:1f.2/ata1/host0/target0:0:0/0:0:0:0
echo "Samsung SSD 860 " > $D/model; echo "ATA     " > $D/vendor; echo naa.5002538e40a1b2c3 > $D/wwid
printf '\000\200\000\010S3Z9NB0K' > $D/vpd_pg80
dev sdb pci0000:00/0000:00:02.0/host1/port-1:0/end_device-1:0/target1:0:0/1:0:0:0 $((2000*G)) 1 0 0 512 512
D=$R/devices/pci0000:00/0000:00:02.0/host1/port-1:0/end_device-1:0/target1:0:0/1:0:0:0
echo ST2000NM0045 > $D/model; echo SEAGATE > $D/vendor; echo naa.600508b1001c3a5e2b5f31ff8b7d1e4a > $D/wwid
printf '\000\200\000\012ZC1B2C3D4E' > $D/vpd_pg80
dev nvme0n1 pci0000:00/0000:00:03.0/nvme/nvme0 $((1024*G)) 0 0 0 4096 4096
D=$R/devices/pci0000:00/0000:00:03.0/nvme/nvme0
echo "Samsung SSD 970 EVO Plus 1TB" > $D/model; echo S4EWNX0R123456 > $D/serial
echo eui.0025388b91b00e41 > $R/devices/pci0000:00/0000:00:03.0/nvme/nvme0/block/nvme0n1/wwid
dev nvme0c0n1 pci0000:00/0000:00:03.0/nvme/nvme0 $((1024*G)) 0 0 0 4096 4096
echo 1 > $R/devices/pci0000:00/0000:00:03.0/nvme/nvme0/block/nvme0c0n1/hidden
dev vda pci0000:00/0000:00:04.0/virtio1 $((3*G)) 1 0 0 512 512
echo vda-serial > $R/devices/pci0000:00/0000:00:04.0/virtio1/block/vda/serial
dev vdb pci0000:00/0000:00:05.0/virtio2 $((8*G)) 1 0 0 512 512
echo "vdb serial/x" > $R/devices/pci0000:00/0000:00:05.0/virtio2/block/vdb/serial
dev sdc pci0000:00/0000:00:14.0/usb2/2-1/2-1:1.0/host6/target6:0:0/6:0:0:0 $((16*G)) 1 0 1 512 512
D=$R/devices/pci0000:00/0000:00:14.0/usb2/2-1/2-1:1.0/host6/target6:0:0/6:0:0:0
echo "Ultra Fit" > $D/model; echo SanDisk > $D/vendor
dev sdd pci0000:00/0000:00:1f.2/ata2/host2/target2:0:0/2:0:0:0 $((100*G)) 0 1 0 512 512
dev sde pci0000:00/0000:00:1f.2/ata3/host3/target3:0:0/3:0:0:0 0 0 0 0 512 512
dev sr0 pci0000:00/0000:00:1f.2/ata4/host4/target4:0:0/4:0:0:0 2097152 1 0 1 2048 2048
dev md0 virtual $((200*G)) 0 0 0 512 512
mkdir -p $R/devices/virtual/block/md0/md; echo raid1 > $R/devices/virtual/block/md0/md/level
dev ram0 virtual 131072 0 0 0 512 512
dev zram0 virtual 131072 0 0 0 4096 4096
dev loop0 virtual 131072 0 0 0 512 512
dev loop1 virtual 0 0 0 0 512 512
dev dm-0 virtual $((50*G)) 0 0 0 512 512
