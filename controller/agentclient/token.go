package agentclient

import (
	"crypto/rand"
	"encoding/base64"
)

// NewToken makes an agent token: 43 URL-safe characters from 32 random
// bytes (IPA ignores tokens shorter than 32). The API issues it at the
// first lookup; the conductor pre-generates it for virtual media.
func NewToken() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}
