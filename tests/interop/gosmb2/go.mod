module smbx.test/gosmb2

go 1.19

require github.com/hirochachacha/go-smb2 v1.1.0

require (
	github.com/geoffgarside/ber v1.1.0 // indirect
	golang.org/x/crypto v0.0.0-20200728195943-123391ffb6de // indirect
)
