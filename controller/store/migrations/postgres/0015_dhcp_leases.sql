-- Addresses handed out by the embedded DHCP server (kiln serve --dhcp full).
-- ip is the IPv4 address as an integer, so that a range is a BETWEEN; the two
-- unique keys are what keep controllers sharing a database from giving one
-- address to two machines or two addresses to one machine.
CREATE TABLE dhcp_leases (
    ip          BIGINT  NOT NULL PRIMARY KEY,
    mac         TEXT    NOT NULL UNIQUE,
    static      BOOLEAN NOT NULL DEFAULT FALSE,
    expires_at  BIGINT  NOT NULL,
    conductor   TEXT    NOT NULL,
    updated_at  BIGINT  NOT NULL
);
