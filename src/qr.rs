//! QR codes as PNG images: a ticket's or pickup code's in the order mail,
//! and the `otpauth://` address a member scans to enrol in two-factor
//! sign-in. Depends on nothing of the shop's.

/// Why a QR code could not be drawn. Its words may repeat the text (a
/// caller drawing a secret says only that it failed).
#[derive(Debug, thiserror::Error)]
pub enum QrError {
    #[error("QR code of {text}: {reason}")]
    Code { text: String, reason: String },
    #[error("QR image: {0}")]
    Image(String),
}

/// `text`'s QR code as a PNG: 6 pixels a module, a quiet zone of 4.
pub fn png(text: &str) -> Result<Vec<u8>, QrError> {
    let qr = qrcode::QrCode::new(text.as_bytes()).map_err(|e| QrError::Code {
        text: text.to_owned(),
        reason: e.to_string(),
    })?;
    let modules = qr.width();
    let dark = qr.to_colors();
    const SCALE: usize = 6;
    const QUIET: usize = 4;
    let side = (modules + 2 * QUIET) * SCALE;
    let mut pixels = vec![255u8; side * side];
    for y in 0..modules {
        for x in 0..modules {
            if dark[y * modules + x] == qrcode::Color::Dark {
                for dy in 0..SCALE {
                    let row = ((y + QUIET) * SCALE + dy) * side;
                    let start = row + (x + QUIET) * SCALE;
                    pixels[start..start + SCALE].fill(0);
                }
            }
        }
    }
    let mut png_bytes = Vec::new();
    {
        let mut encoder = png::Encoder::new(&mut png_bytes, side as u32, side as u32);
        encoder.set_color(png::ColorType::Grayscale);
        encoder.set_depth(png::BitDepth::Eight);
        let mut writer = encoder
            .write_header()
            .map_err(|e| QrError::Image(e.to_string()))?;
        writer
            .write_image_data(&pixels)
            .map_err(|e| QrError::Image(e.to_string()))?;
    }
    Ok(png_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qr_images_are_png() {
        let png = png("TKT-ABCD-EFGH").unwrap();
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    }
}
