package pki

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
)

// The files in the directory.
const (
	caCertFile      = "ca.crt"
	caKeyFile       = "ca.key"
	servingCertFile = "serving.crt"
	servingKeyFile  = "serving.key"
	adminCertFile   = "admin.crt"
	adminKeyFile    = "admin.key"

	// AddressFile is the file in the directory where the running API
	// records the address it listens on (WriteAddress).
	AddressFile = "address"
)

// groupOther are the mode bits of access by group and others, which the
// directory and its files must not have.
const groupOther fs.FileMode = 0o077

// ensureDir makes dir 0700 if it is missing, and checks that group and
// others have no access to it.
func ensureDir(dir string) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return fmt.Errorf("making %s: %w", filepath.Dir(dir), err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("making %s: %w", dir, err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	return checkMode(dir, fi.Mode())
}

// checkMode refuses a file or directory open to group or others.
func checkMode(path string, mode fs.FileMode) error {
	if mode.Perm()&groupOther != 0 {
		return fmt.Errorf("%s has mode %04o, open to group or others: staticlet keeps its API's keys private (0600 files, 0700 directory); chmod it back, or, if a key may have been copied, remove the directory to have new ones made", path, mode.Perm())
	}
	return nil
}

// readPrivate reads a file of the directory, refusing one open to group
// or others. A missing file gives an error that wraps fs.ErrNotExist.
func readPrivate(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if err := checkMode(path, fi.Mode()); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if _, err := b.ReadFrom(f); err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return b.Bytes(), nil
}

// WriteFile writes data to path as the package writes its own files:
// mode 0600, into a temporary file beside path that is synced and renamed
// over it, so that a reader or a crash sees the old content or the new,
// never a part.
func WriteFile(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Chmod(0o600)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// readPEM reads the file path, whose first PEM block must be of type
// typ, and returns that block's content and the whole file.
func readPEM(path, typ, what string) ([]byte, []byte, error) {
	data, err := readPrivate(path)
	if err != nil {
		return nil, nil, err
	}
	block, _ := pem.Decode(data)
	if block == nil || block.Type != typ {
		return nil, nil, fmt.Errorf("%s holds no PEM %s", path, what)
	}
	return block.Bytes, data, nil
}

// readCert parses the certificate in the PEM file path.
func readCert(path string) (*x509.Certificate, []byte, error) {
	der, data, err := readPEM(path, "CERTIFICATE", "certificate")
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, fmt.Errorf("parsing the certificate in %s: %w", path, err)
	}
	return cert, data, nil
}

// readKey parses the ECDSA private key in the PEM file path.
func readKey(path string) (*ecdsa.PrivateKey, []byte, error) {
	der, data, err := readPEM(path, "EC PRIVATE KEY", "EC private key")
	if err != nil {
		return nil, nil, err
	}
	key, err := x509.ParseECPrivateKey(der)
	if err != nil {
		return nil, nil, fmt.Errorf("parsing the key in %s: %w", path, err)
	}
	return key, data, nil
}

// readPair reads a certificate and its key. A pair whose key is not the
// certificate's is an error naming both files.
func readPair(dir, certFile, keyFile string) (*keyPair, error) {
	certPath, keyPath := filepath.Join(dir, certFile), filepath.Join(dir, keyFile)
	cert, certPEM, err := readCert(certPath)
	if err != nil {
		return nil, err
	}
	key, keyPEM, err := readKey(keyPath)
	if err != nil {
		return nil, err
	}
	if !key.PublicKey.Equal(cert.PublicKey) {
		return nil, fmt.Errorf("%w: the key in %s is not the one of %s", errMismatch, keyPath, certPath)
	}
	return &keyPair{cert: cert, key: key, certPEM: certPEM, keyPEM: keyPEM}, nil
}

// errMismatch marks a certificate and key that do not belong together.
var errMismatch = errors.New("certificate and key do not match")

// writePair writes a pair's key, then its certificate. A crash between
// the two leaves a pair that does not match, which a leaf's next check
// issues again.
func writePair(dir, certFile, keyFile string, p *keyPair) error {
	if err := WriteFile(filepath.Join(dir, keyFile), p.keyPEM); err != nil {
		return err
	}
	return WriteFile(filepath.Join(dir, certFile), p.certPEM)
}

// WriteAddress records in dir's AddressFile the address ("host:port") the
// API listens on, for `staticlet kubeconfig`.
func WriteAddress(dir, address string) error {
	if _, _, err := net.SplitHostPort(address); err != nil {
		return fmt.Errorf("recording the API address %q: %w", address, err)
	}
	return WriteFile(filepath.Join(dir, AddressFile), []byte(address+"\n"))
}

// ReadAddress returns the address recorded in dir's AddressFile. A
// missing file gives an error that wraps fs.ErrNotExist.
func ReadAddress(dir string) (string, error) {
	path := filepath.Join(dir, AddressFile)
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	address := strings.TrimSpace(string(data))
	if _, _, err := net.SplitHostPort(address); err != nil {
		return "", fmt.Errorf("%s holds no host:port: %w", path, err)
	}
	return address, nil
}
